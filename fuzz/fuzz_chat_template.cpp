// Fuzzes the Jinja chat-template interpreter (src/chat/chat_template.h): lexing and parsing of
// the template source, then rendering it against a context. Templates ship inside downloaded
// tokenizer_config.json files and contexts carry client messages, tools and kwargs, so a
// template that is wrong or hostile must end in a dflash::Error, not a crash.
//
// Input: context JSON NUL template source. JSON holds no raw NUL, so the template after the NUL
// can be any bytes. Without a NUL, or when the context is not a JSON object, the whole input is
// the template and a small chat context stands in, so that mutations of a seed template still
// render against realistic messages.
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "chat/chat_template.h"
#include "fuzz_input.h"
#include "util/error.h"

namespace {

const nlohmann::ordered_json& default_context() {
  static const nlohmann::ordered_json ctx = nlohmann::ordered_json::parse(R"({
    "messages": [
      {"role": "system", "content": "You are terse."},
      {"role": "user", "content": "What is 2+2?"},
      {"role": "assistant", "content": "4", "reasoning_content": "easy"},
      {"role": "user", "content": "And 3+3?"}],
    "add_generation_prompt": true,
    "bos_token": "<s>", "eos_token": "</s>",
    "tools": [{"type": "function", "function": {"name": "add", "description": "adds",
      "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}}}]
  })");
  return ctx;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in = fuzz::as_view(data, size);
  std::string_view source = in;
  nlohmann::ordered_json ctx;
  if (in.find('\0') != std::string_view::npos) {
    const std::string_view json_part = fuzz::take_until_nul(in);
    ctx = nlohmann::ordered_json::parse(json_part, nullptr, /*allow_exceptions=*/false);
    source = in;
  }
  if (!ctx.is_object()) ctx = default_context();
  try {
    dflash::ChatTemplate tpl{std::string(source)};
    tpl.set_fixed_time(1700000000);  // strftime_now() must not depend on the clock
    (void)tpl.render(ctx);
  } catch (const dflash::Error&) {
    // Syntax errors, render errors and raise_exception(): expected for most inputs.
  }
  return 0;
}
