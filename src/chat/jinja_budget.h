#pragma once
// What one render may spend. A chat template comes with the model files and renders request
// data, so a template that loops for ever, builds gigabyte strings or recurses without end must
// fail with an error that names the limit, not hang or crash the server. The limits sit far
// above what real templates need (tests/unit/chat/chat_limits_test.cpp renders long
// conversations with Qwen3, Llama 3.1, DeepSeek V3 and gpt-oss).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dflash::jinja {

class Value;
using ValueList = std::vector<Value>;

// The largest string or list (its items plus the text of its string items) a template may
// make: 64 MiB is 16 times the text of a million-token context.
constexpr size_t kMaxValueBytes = size_t{64} << 20;
// The largest rendering, for the same reason.
constexpr size_t kMaxOutputBytes = size_t{64} << 20;

// Work is counted in steps: one for each node evaluated or statement run, kStepsPerIteration
// for each loop iteration, one for each list item copied or compared and one for each
// kBytesPerStep bytes of string made, weights that track what each costs. A step takes 20-30
// ns of CPU here, so the budget stops a runaway template after about 1-1.5 s. Qwen3, Llama 3.1
// and DeepSeek V3 spend about 200 steps a message (5,000 messages: 2% of the budget). gpt-oss
// rereads the rest of the conversation at every tool call, so its cost grows with their
// product: 2,000 messages of which 500 are tool calls take 20% of the budget, and it runs out
// near 4,500 such messages, which its 131k-token context holds only at under 30 tokens each.
constexpr uint64_t kMaxSteps = 50'000'000;
constexpr size_t kBytesPerStep = 4;
constexpr uint64_t kStepsPerIteration = 4;  // a new scope with the target and `loop` bound

// How deeply evaluations may nest at render time (expressions, statements, macro calls and
// recursive loops together): the parser bounds one template's tree (kMaxDepth), but macros
// calling macros multiply that. At this limit the stack holds about 0.7 MiB (4.5 MiB under
// AddressSanitizer); jinja2 stops sooner, as each level spends several of Python's 1000 frames.
constexpr int kMaxRenderDepth = 1000;

// How deeply values may nest inside each other for the functions that walk them recursively
// (str, repr, tojson, ==, <, hashing, reading the context from JSON): a loop can wrap a list in
// a list millions of times, and printing that would overflow the stack. Python stops such
// walks near its recursion limit of 1000; real data (tool schemas) nests a few dozen levels.
constexpr int kMaxValueDepth = 500;

// One level of such a walk; fails beyond kMaxValueDepth.
class ValueNesting {
 public:
  ValueNesting();
  ~ValueNesting();
  ValueNesting(const ValueNesting&) = delete;
  ValueNesting& operator=(const ValueNesting&) = delete;
};

// Fails the render when a string or list of `bytes` would be made; called before allocating.
void check_size(size_t bytes);
// The same for a list of n items, and for n copies of something of `bytes`.
void check_items(size_t n);
void check_repeat(size_t bytes, int64_t n);
// What a list's copy allocates: its items and the text of its string items (lists and dicts
// inside it are shared, not copied).
size_t list_bytes(const ValueList& items);
// out += text, failing instead when the result would exceed kMaxValueBytes.
void append_checked(std::string& out, std::string_view text);

// The work done by one render.
class RenderBudget {
 public:
  void charge(uint64_t steps) {
    steps_ += steps;
    if (steps_ > kMaxSteps) exceeded();
  }
  uint64_t steps() const { return steps_; }

 private:
  [[noreturn]] static void exceeded();
  uint64_t steps_ = 0;
};

// Makes a budget the one this thread's render charges, for the helpers deep in the value code
// that do work proportional to their data (copying, comparing) and see no interpreter.
class ActiveBudget {
 public:
  explicit ActiveBudget(RenderBudget& b);
  ~ActiveBudget();
  ActiveBudget(const ActiveBudget&) = delete;
  ActiveBudget& operator=(const ActiveBudget&) = delete;

 private:
  RenderBudget* prev_;
};

// Charges the active budget; does nothing outside a render.
void charge(uint64_t steps);

}  // namespace dflash::jinja
