#include "chat/jinja_budget.h"

#include <string>

#include "chat/jinja_value.h"

namespace dflash::jinja {

namespace {

thread_local RenderBudget* active = nullptr;
thread_local int value_depth = 0;

std::string mib(size_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }

[[noreturn]] void too_large() {
  fail("chat template exceeded the limit of " + mib(kMaxValueBytes) + " for one string or list");
}

}  // namespace

void check_size(size_t bytes) {
  if (bytes > kMaxValueBytes) too_large();
}

void check_items(size_t n) {
  if (n > kMaxValueBytes / sizeof(Value)) too_large();
}

void check_repeat(size_t bytes, int64_t n) {
  if (n > 0 && bytes > 0 && static_cast<uint64_t>(n) > kMaxValueBytes / bytes) too_large();
}

void append_checked(std::string& out, std::string_view text) {
  check_size(out.size() + text.size());
  out += text;
}

size_t list_bytes(const ValueList& items) {
  size_t bytes = items.size() * sizeof(Value);
  for (const auto& v : items)
    if (v.is_string()) bytes += v.str().size();
  return bytes;
}

ValueNesting::ValueNesting() {
  if (value_depth >= kMaxValueDepth)
    fail("chat template exceeded the limit of " + std::to_string(kMaxValueDepth) +
         " nested values (lists, dicts and namespaces inside each other)");
  ++value_depth;
}

ValueNesting::~ValueNesting() { --value_depth; }

void RenderBudget::exceeded() {
  fail("chat template exceeded its budget of " + std::to_string(kMaxSteps) +
       " steps (evaluations, loop iterations and data processed)");
}

ActiveBudget::ActiveBudget(RenderBudget& b) : prev_(active) { active = &b; }
ActiveBudget::~ActiveBudget() { active = prev_; }

void charge(uint64_t steps) {
  if (active) active->charge(steps);
}

}  // namespace dflash::jinja
