#pragma once
// Tool calls in generated text: Qwen3's hermes form
//   <tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>
// and Qwen3.5's XML form
//   <tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>
// parsed from a finished answer (parse_tool_calls) or from a stream (ToolCallStream), with the
// same result both ways: the same calls, ids, arguments strings and leftover text.
//
// A block is taken as a call only when it is whole and valid; anything else (bad JSON, an
// unclosed block, a function the request did not offer) stays text, and the reason is kept
// in `note` for the response's "dflash" object. In incremental mode (a forced tool_choice,
// the answer decoded under the call grammar) an answer's block is a call from the moment it
// names an allowed function, so that its arguments can stream as written (ToolCallOptions).
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace dflash::server {

enum class ToolFormat { None, Hermes, Xml };

// The form the model's chat template writes: XML when it writes "<function=", hermes when it
// writes "<tool_call>", else none.
ToolFormat tool_format_from_template(const std::string& template_source);
const char* tool_format_name(ToolFormat f);

// What the request allows: the offered tools (the OpenAI `tools` array), and for a named
// tool_choice the one function a call may name.
struct ToolCallOptions {
  ToolFormat format = ToolFormat::None;
  nlohmann::ordered_json tools;   // null or the request's tools array
  std::string only_function;      // non-empty: calls to any other function stay text
  bool parallel = true;           // false: blocks after the first call stay text
  std::string id_base;            // call ids are id_base + "_" + index (tool_call_id_base)
  // tool_choice required / named (the answer decoded under the call grammar): a block in the
  // answer is a call as soon as its function name is known and allowed, and its arguments
  // stream as they arrive; a block cut before </tool_call> is still a call, with the arguments
  // written so far (ToolParse::cut). Blocks in reasoning are judged whole as without it.
  bool incremental = false;
};

// What a constrained decoder must force for tool_choice "required" (function empty: any of
// `tools`) or a named function. Carried in GenRequest::forced_tool_call; structured_output.h
// turns it into the grammar the answer is decoded under.
struct ForcedToolCall {
  ToolFormat format = ToolFormat::None;
  nlohmann::ordered_json tools;   // the request's tools array
  std::string function;           // named tool_choice: this function; empty: any
  bool parallel = true;           // parallel_tool_calls
};

// "call_" + the response id's tail ("chatcmpl-0a1b2c..." -> "call_0a1b2c..."); a call's id is
// that + "_" + its index: deterministic per request, so a streamed and an unstreamed parse of
// the same text give the same ids, and unique across requests as response ids are.
std::string tool_call_id_base(const std::string& response_id);

struct ToolCall {
  int index = 0;
  std::string id, name;
  // A JSON object as a string: hermes: the model's text of the arguments object with the
  // whitespace outside strings taken out; XML: {"P":VALUE,...} parameter by parameter, a value
  // a JSON string (escaped as written) or, where the schema asks, the JSON it converts to.
  std::string arguments;
  bool operator==(const ToolCall& o) const {
    return index == o.index && id == o.id && name == o.name && arguments == o.arguments;
  }
};

// A finished answer's split: reasoning and content with the call blocks taken out, the calls
// (those found in reasoning first, as they were written), and why any block stayed text.
struct ToolParse {
  std::string reasoning, content;
  std::vector<ToolCall> calls;
  std::string note;  // empty when nothing was left unparsed
  bool cut = false;  // incremental: the last call was cut (max_tokens); its arguments are partial
};

// One block's inside (between <tool_call> and </tool_call>) as a call; false with `why` set
// when it is not a valid call for `opt`.
bool parse_tool_block(const std::string& inside, const ToolCallOptions& opt, ToolCall& call, std::string& why);

// XML form: a parameter's raw text as the JSON value its schema type asks for (string stays
// a string; integer, number, boolean, object, array, null parsed as JSON, else the string).
nlohmann::ordered_json convert_xml_parameter(const std::string& raw, const nlohmann::ordered_json& schema);

ToolParse parse_tool_calls(const std::string& reasoning, const std::string& content, const ToolCallOptions& opt);

// Incremental mode, shared by the finished and the streamed parse. What an unfinished block's
// inside says so far: the function name once its tag or string is closed, and the prefix of
// the canonical arguments that no later text can change (it only grows as text is added).
struct CallProgress {
  bool named = false;
  std::string name, arguments;
};
CallProgress call_progress(const std::string& inside, const ToolCallOptions& opt);
// An unfinished block's inside without a tail that could be the start of "</tool_call>".
std::string without_partial_close(const std::string& inside);
// Whether a block with this progress is a call from now on (`count` calls before it).
bool commits(const CallProgress& p, const ToolCallOptions& opt, int count);
// A committed block's arguments at its close: the canonical arguments when the block is a
// valid call that extends the progress, else the progress with `why` set.
std::string committed_arguments(const std::string& inside, const CallProgress& p, const ToolCallOptions& opt,
                                std::string& why);

// One streamed piece of a call: the first piece of a call has its id and name (and empty
// arguments); later pieces carry argument fragments.
struct ToolCallDelta {
  int index = 0;
  std::string id, name;  // only on the first piece
  std::string arguments;
  bool first = false;
};

struct ToolStreamOut {
  std::string reasoning, content;
  std::vector<ToolCallDelta> calls;
  bool empty() const { return reasoning.empty() && content.empty() && calls.empty(); }
};

// The streaming parser: text that could be the start of "<tool_call>" is held back until it
// is known not to be, and a block until it closes (then it is a call, or text again) or, in
// incremental mode, until it commits (then its arguments stream as they grow). Trailing
// whitespace is held too: once a call was found it is dropped at the end, as in the finished
// parse (so an answer that was only calls has no content).
class ToolCallStream {
 public:
  explicit ToolCallStream(ToolCallOptions opt);
  ToolStreamOut push(const std::string& reasoning, const std::string& content);
  ToolStreamOut flush();
  int calls() const { return count_; }
  const std::string& note() const { return note_; }
  bool cut() const { return cut_; }

 private:
  struct Channel {
    std::string pending;   // text not yet judged
    std::string ws;        // trailing whitespace of judged text, not yet sent
    bool in_block = false;
    bool sent_text = false;
    bool incremental = false;  // the answer's channel in incremental mode
    bool committed = false;    // the open block is a call (index `index`), `sent` its arguments so far
    int index = 0;
    std::string sent;
  };
  void advance(Channel& ch, const std::string& inside, std::vector<ToolCallDelta>& calls);
  void send_arguments(Channel& ch, const std::string& args, std::vector<ToolCallDelta>& calls);
  void feed(Channel& ch, const std::string& text, std::string& out, std::vector<ToolCallDelta>& calls, bool final);
  void emit_text(Channel& ch, const std::string& text, std::string& out);
  void take_block(const std::string& raw, const std::string& inside, Channel& ch, std::string& out,
                  std::vector<ToolCallDelta>& calls);

  ToolCallOptions opt_;
  Channel reasoning_, content_;
  int count_ = 0;
  std::string note_;
  bool cut_ = false;
};

// Adds the calls to an unstreamed chat response (message.tool_calls, content null when only
// whitespace is left, finish_reason "tool_calls") and the parse note to its "dflash" object.
void apply_tool_parse(nlohmann::ordered_json& response, const ToolParse& p);
// The chat chunk delta.tool_calls array for streamed pieces.
nlohmann::ordered_json tool_call_deltas_json(const std::vector<ToolCallDelta>& calls);

}  // namespace dflash::server
