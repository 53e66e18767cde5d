// Fuzzes the tool-call parser of the server (src/server/tool_calls.h) on model output, which is
// any text: the finished parse (parse_tool_calls) and the streaming parser (ToolCallStream) fed
// in pieces must agree exactly (reasoning, content, calls with their ids and arguments strings,
// the parse note, whether a call was cut); a difference aborts, as does any crash or sanitizer
// report. Every call's arguments must be a JSON object (but in incremental mode, where a call
// cut or broken after it committed keeps the arguments it had streamed).
//
// Input: one flags byte (bit 0: XML form, else hermes; bit 1: parallel_tool_calls; bit 2: a
// named tool_choice, get_time; bit 3: incremental, as under a forced tool_choice), one byte seeding the piece sizes (1 to 8 bytes), then the
// reasoning text, a NUL, and the answer text.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "fuzz_input.h"
#include "server/tool_calls.h"

namespace {

using ojson = nlohmann::ordered_json;
namespace srv = dflash::server;

const ojson& tools() {
  static const ojson t = ojson::parse(R"([
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
      "properties": {"city": {"type": "string"}, "days": {"type": "integer"}, "x": {"type": ["object", "null"]}}}}},
    {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object",
      "properties": {"tz": {"type": "string"}}}}}])");
  return t;
}

void check(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  srv::ToolCallOptions o;
  o.format = (data[0] & 1) ? srv::ToolFormat::Xml : srv::ToolFormat::Hermes;
  o.parallel = (data[0] & 2) != 0;
  if (data[0] & 4) o.only_function = "get_time";
  o.incremental = (data[0] & 8) != 0;
  o.tools = tools();
  o.id_base = "call_fuzz";
  uint32_t rng = data[1] * 2654435761u + 1;
  std::string_view in = fuzz::as_view(data + 2, size - 2);
  const std::string reasoning(fuzz::take_until_nul(in));
  const std::string content(in);

  const srv::ToolParse whole = srv::parse_tool_calls(reasoning, content, o);
  srv::ToolCallStream s(o);
  srv::ToolParse got;
  auto take = [&](const srv::ToolStreamOut& out) {
    got.reasoning += out.reasoning;
    got.content += out.content;
    for (const srv::ToolCallDelta& d : out.calls) {
      if (d.first) {
        check(d.index == int(got.calls.size()) && d.arguments.empty());
        got.calls.push_back({d.index, d.id, d.name, ""});
      } else {
        check(d.index >= 0 && d.index < int(got.calls.size()));
        got.calls[size_t(d.index)].arguments += d.arguments;
      }
    }
  };
  auto feed = [&](const std::string& text, bool is_reasoning) {
    for (size_t i = 0; i < text.size();) {
      rng = rng * 1664525u + 1013904223u;
      const size_t k = 1 + (rng >> 24) % 8;
      const std::string piece = text.substr(i, k);
      take(is_reasoning ? s.push(piece, "") : s.push("", piece));
      i += k;
    }
  };
  feed(reasoning, true);
  feed(content, false);
  take(s.flush());
  got.note = s.note();

  check(got.reasoning == whole.reasoning && got.content == whole.content && got.note == whole.note);
  check(s.cut() == whole.cut && (!whole.cut || o.incremental));
  check(got.calls.size() == whole.calls.size() && s.calls() == int(whole.calls.size()));
  for (size_t i = 0; i < whole.calls.size(); ++i) {
    check(got.calls[i] == whole.calls[i]);
    check(whole.calls[i].id == "call_fuzz_" + std::to_string(i));
    // Incremental mode: a call cut or broken after it committed keeps the arguments it had so far.
    if (!o.incremental) check(ojson::parse(whole.calls[i].arguments, nullptr, false).is_object());
  }
  if (!o.parallel) check(whole.calls.size() <= 1);
  return 0;
}
