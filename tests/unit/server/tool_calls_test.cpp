// Tool calls in generated text (server/tool_calls.h): Qwen3's hermes form and Qwen3.5's XML
// form, whole and streamed. The model texts are the shipped chat templates' own renderings of
// an assistant turn with tool_calls (what the models are trained to write), plus hand-made
// variants (content around the calls, broken blocks, calls inside <think>). Every streamed
// case is checked against the finished parse at every byte boundary and in 1-byte chunks.
#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <sstream>

#include "chat/chat_template.h"
#include "server/tool_calls.h"

using namespace dflash;
using namespace dflash::server;
using ojson = nlohmann::ordered_json;

namespace {

const ojson kTools = ojson::parse(R"([
  {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                   "required": ["city"]}}},
  {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object",
    "properties": {"tz": {"type": "string"}}}}},
  {"type": "function", "function": {"name": "typed", "parameters": {"type": "object", "properties": {
    "s": {"type": "string"}, "i": {"type": "integer"}, "n": {"type": "number"}, "b": {"type": "boolean"},
    "o": {"type": "object"}, "a": {"type": "array"}, "z": {"type": "null"}, "maybe": {"type": ["integer", "null"]},
    "sn": {"type": ["string", "null"]}}}}}
])");

ToolCallOptions opts(ToolFormat f) {
  ToolCallOptions o;
  o.format = f;
  o.tools = kTools;
  o.id_base = tool_call_id_base("chatcmpl-0a1b2c3d000001");
  return o;
}

std::string read(const std::string& path) {
  std::ifstream in(std::string(DFLASH_SOURCE_DIR) + "/" + path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string qwen3_template() { return ojson::parse(read("models/demo/target/tokenizer_config.json"))["chat_template"]; }
std::string qwen35_template() { return read("models/demo35/target/chat_template.jinja"); }

// What the template writes for an assistant turn with these calls: the text between the
// assistant header and <|im_end|> (the model's own output for such a turn).
std::string rendered_turn(const std::string& source, const std::string& content, const ojson& calls) {
  const ojson ctx = {{"messages",
                      {{{"role", "user"}, {"content", "hi"}},
                       {{"role", "assistant"}, {"content", content}, {"tool_calls", calls}},
                       {{"role", "user"}, {"content", "next"}}}},
                     {"tools", kTools},
                     {"add_generation_prompt", false}};
  const std::string text = ChatTemplate(source).render(ctx);
  const std::string head = "<|im_start|>assistant\n";
  size_t b = text.find(head);
  EXPECT_NE(b, std::string::npos);
  b += head.size();
  // Qwen templates put an empty think block before the last assistant turn; not here, but skip one if present.
  if (text.compare(b, 7, "<think>") == 0) b = text.find("</think>", b) + 8;
  while (b < text.size() && text[b] == '\n') ++b;
  const size_t e = text.find("<|im_end|>", b);
  return text.substr(b, e - b);
}

ojson call(const std::string& name, const ojson& args) {
  return {{"type", "function"}, {"function", {{"name", name}, {"arguments", args}}}};
}

// The streamed result reassembled: text of each channel, calls built from their pieces.
ToolParse reassemble(const ToolCallOptions& o, const std::vector<std::pair<std::string, std::string>>& pieces) {
  ToolCallStream s(o);
  ToolParse p;
  auto take = [&](const ToolStreamOut& out) {
    p.reasoning += out.reasoning;
    p.content += out.content;
    for (const ToolCallDelta& d : out.calls) {
      if (d.first) {
        EXPECT_EQ(d.index, int(p.calls.size())) << "calls start in index order";
        ToolCall c;
        c.index = d.index;
        c.id = d.id;
        c.name = d.name;
        c.arguments = d.arguments;
        p.calls.push_back(c);
      } else {
        EXPECT_TRUE(d.index >= 0 && d.index < int(p.calls.size())) << "a fragment of a call that has not started";
        if (d.index >= 0 && d.index < int(p.calls.size())) p.calls[size_t(d.index)].arguments += d.arguments;
      }
    }
  };
  for (const auto& [r, c] : pieces) take(s.push(r, c));
  take(s.flush());
  p.note = s.note();
  EXPECT_EQ(s.calls(), int(p.calls.size()));
  return p;
}

void expect_same(const ToolParse& a, const ToolParse& b, const std::string& how) {
  EXPECT_EQ(a.reasoning, b.reasoning) << how;
  EXPECT_EQ(a.content, b.content) << how;
  EXPECT_EQ(a.note, b.note) << how;
  ASSERT_EQ(a.calls.size(), b.calls.size()) << how;
  for (size_t i = 0; i < a.calls.size(); ++i) EXPECT_TRUE(a.calls[i] == b.calls[i]) << how << " call " << i;
}

// The finished parse, checked against streams split at every byte boundary (of the reasoning,
// then of the answer) and streams of 1-byte pieces.
ToolParse parse_checked(const ToolCallOptions& o, const std::string& reasoning, const std::string& content) {
  const ToolParse whole = parse_tool_calls(reasoning, content, o);
  expect_same(reasoning.empty() && content.empty() ? whole : reassemble(o, {{reasoning, ""}, {"", content}}), whole,
              "one piece each");
  for (size_t i = 0; i <= reasoning.size(); ++i)
    expect_same(reassemble(o, {{reasoning.substr(0, i), ""}, {reasoning.substr(i), ""}, {"", content}}), whole,
                "reasoning split at " + std::to_string(i));
  for (size_t i = 0; i <= content.size(); ++i)
    expect_same(reassemble(o, {{reasoning, ""}, {"", content.substr(0, i)}, {"", content.substr(i)}}), whole,
                "content split at " + std::to_string(i));
  std::vector<std::pair<std::string, std::string>> bytes;
  for (char ch : reasoning) bytes.push_back({std::string(1, ch), ""});
  for (char ch : content) bytes.push_back({"", std::string(1, ch)});
  expect_same(reassemble(o, bytes), whole, "1-byte pieces");
  return whole;
}

}  // namespace

TEST(ToolCalls, FormatFromTheShippedTemplates) {
  EXPECT_EQ(tool_format_from_template(qwen3_template()), ToolFormat::Hermes);
  EXPECT_EQ(tool_format_from_template(qwen35_template()), ToolFormat::Xml);
  EXPECT_EQ(tool_format_from_template("{% for m in messages %}{{ m.content }}{% endfor %}"), ToolFormat::None);
  EXPECT_EQ(tool_call_id_base("chatcmpl-0a1b2c3d000001"), "call_0a1b2c3d000001");
}

TEST(ToolCalls, HermesSingleCallAsTheTemplateWritesIt) {
  const std::string text = rendered_turn(qwen3_template(), "", ojson::array({call("get_weather", {{"city", "Paris"}})}));
  ASSERT_NE(text.find("<tool_call>\n{\"name\": \"get_weather\""), std::string::npos) << text;
  const ToolParse p = parse_checked(opts(ToolFormat::Hermes), "", text);
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].name, "get_weather");
  EXPECT_EQ(p.calls[0].arguments, R"({"city":"Paris"})");
  EXPECT_EQ(p.calls[0].id, "call_0a1b2c3d000001_0");
  EXPECT_EQ(p.calls[0].index, 0);
  EXPECT_EQ(p.content, "") << "only calls: no content";
  EXPECT_EQ(p.note, "");
}

TEST(ToolCalls, HermesParallelCallsWithContentBefore) {
  const std::string text = rendered_turn(qwen3_template(), "Let me look both up.",
                                         {call("get_weather", {{"city", "Paris"}, {"days", 3}}),
                                          call("get_time", {{"tz", "Europe/Paris"}})});
  const ToolParse p = parse_checked(opts(ToolFormat::Hermes), "", text);
  ASSERT_EQ(p.calls.size(), 2u) << text;
  EXPECT_EQ(p.calls[0].arguments, R"({"city":"Paris","days":3})");
  EXPECT_EQ(p.calls[1].name, "get_time");
  EXPECT_EQ(p.calls[1].arguments, R"({"tz":"Europe/Paris"})");
  EXPECT_EQ(p.calls[1].id, "call_0a1b2c3d000001_1");
  EXPECT_EQ(p.content, "Let me look both up.");
}

TEST(ToolCalls, HermesContentAfterTheCallStaysContent) {
  const std::string text =
      "Checking.\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>\nI will wait for it.  \n";
  const ToolParse p = parse_checked(opts(ToolFormat::Hermes), "", text);
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].arguments, "{}");
  EXPECT_EQ(p.content, "Checking.\n\nI will wait for it.") << "blocks out, trailing whitespace trimmed";
}

TEST(ToolCalls, HermesArgumentsAsAStringOrMissing) {
  const ToolParse p = parse_checked(
      opts(ToolFormat::Hermes), "",
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": \"{\\\"city\\\": \\\"Oslo\\\"}\"}\n</tool_call>\n"
      "<tool_call>\n{\"name\": \"get_time\"}\n</tool_call>");
  ASSERT_EQ(p.calls.size(), 2u);
  EXPECT_EQ(p.calls[0].arguments, R"({"city":"Oslo"})");
  EXPECT_EQ(p.calls[1].arguments, "{}");
}

TEST(ToolCalls, BrokenBlocksStayContentWithTheReason) {
  const ToolCallOptions o = opts(ToolFormat::Hermes);
  const std::string bad_json = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": }\n</tool_call>";
  ToolParse p = parse_checked(o, "", bad_json);
  EXPECT_TRUE(p.calls.empty());
  EXPECT_EQ(p.content, bad_json);
  EXPECT_NE(p.note.find("not valid JSON"), std::string::npos) << p.note;

  const std::string unclosed = "Sure.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n";
  p = parse_checked(o, "", unclosed);
  EXPECT_TRUE(p.calls.empty());
  EXPECT_EQ(p.content, unclosed) << "nothing lost, trailing newline kept (no call was found)";
  EXPECT_NE(p.note.find("unclosed"), std::string::npos) << p.note;

  const std::string unknown = "<tool_call>\n{\"name\": \"rm_rf\", \"arguments\": {}}\n</tool_call>";
  p = parse_checked(o, "", unknown);
  EXPECT_TRUE(p.calls.empty());
  EXPECT_EQ(p.content, unknown);
  EXPECT_NE(p.note.find("'rm_rf', which is not among the request's tools"), std::string::npos) << p.note;

  const std::string not_object = "<tool_call>\n{\"name\": \"get_time\", \"arguments\": [1]}\n</tool_call>";
  p = parse_checked(o, "", not_object);
  EXPECT_TRUE(p.calls.empty());
  EXPECT_NE(p.note.find("not a JSON object"), std::string::npos) << p.note;
}

TEST(ToolCalls, AGoodCallBesideABrokenOne) {
  const std::string good = "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"tz\": \"UTC\"}}\n</tool_call>";
  const std::string bad = "<tool_call>\n{\"name\": \"nope\"}\n</tool_call>";
  const ToolParse p = parse_checked(opts(ToolFormat::Hermes), "", bad + "\n" + good);
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].index, 0) << "indexes count the calls, not the blocks";
  EXPECT_EQ(p.calls[0].id, "call_0a1b2c3d000001_0");
  EXPECT_EQ(p.content, bad);
  EXPECT_NE(p.note.find("'nope'"), std::string::npos);
}

TEST(ToolCalls, TextLikeTheTagIsNotHeldForever) {
  // "<tool" and "<tool_cal" are prefixes of the tag; at the end they are content.
  const ToolParse p = parse_checked(opts(ToolFormat::Hermes), "", "a <tool and <tools> and <tool_cal");
  EXPECT_TRUE(p.calls.empty());
  EXPECT_EQ(p.content, "a <tool and <tools> and <tool_cal");
  EXPECT_EQ(p.note, "");
  ToolCallStream s(opts(ToolFormat::Hermes));
  EXPECT_EQ(s.push("", "x <tool_c").content, "x") << "the possible tag and the space before it are held";
  EXPECT_EQ(s.push("", "ar").content, " <tool_car") << "released once it cannot be the tag";
}

TEST(ToolCalls, ACallInsideThinkMovesOutOfReasoning) {
  const std::string reasoning =
      "The user wants the weather. I will call the tool.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
      "{\"city\": \"Paris\"}}\n</tool_call>";
  ToolParse p = parse_checked(opts(ToolFormat::Hermes), reasoning, "");
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].name, "get_weather");
  EXPECT_EQ(p.reasoning, "The user wants the weather. I will call the tool.");
  EXPECT_EQ(p.content, "");

  // One call in reasoning, another in the answer: indexes in the order written, none twice.
  p = parse_checked(opts(ToolFormat::Hermes), reasoning,
                    "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"tz\": \"CET\"}}\n</tool_call>");
  ASSERT_EQ(p.calls.size(), 2u);
  EXPECT_EQ(p.calls[0].name, "get_weather");
  EXPECT_EQ(p.calls[1].name, "get_time");
  EXPECT_EQ(p.calls[1].index, 1);
  EXPECT_EQ(p.content, "");

  // An unclosed block in reasoning stays reasoning, whole.
  const std::string open = "Maybe <tool_call>\n{\"name\": \"get_time\"";
  p = parse_checked(opts(ToolFormat::Hermes), open, "The answer.");
  EXPECT_TRUE(p.calls.empty());
  EXPECT_EQ(p.reasoning, open);
  EXPECT_EQ(p.content, "The answer.");
}

TEST(ToolCalls, ParallelFalseKeepsOnlyTheFirstCall) {
  ToolCallOptions o = opts(ToolFormat::Hermes);
  o.parallel = false;
  const std::string second = "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>";
  const ToolParse p = parse_checked(
      o, "", "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}\n</tool_call>\n" + second);
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].name, "get_weather");
  EXPECT_EQ(p.content, "\n" + second);
  EXPECT_NE(p.note.find("parallel_tool_calls"), std::string::npos);
}

TEST(ToolCalls, ANamedToolChoiceTakesOnlyThatFunction) {
  ToolCallOptions o = opts(ToolFormat::Hermes);
  o.only_function = "get_time";
  const ToolParse p = parse_checked(
      o, "", "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}\n</tool_call>");
  EXPECT_TRUE(p.calls.empty());
  EXPECT_NE(p.note.find("not the function tool_choice names"), std::string::npos) << p.note;
}

TEST(ToolCalls, XmlCallsAsTheTemplateWritesThem) {
  const std::string text = rendered_turn(qwen35_template(), "I'll check.",
                                         {call("get_weather", {{"city", "Paris"}, {"days", 3}}),
                                          call("get_time", {{"tz", "Europe/Paris"}})});
  ASSERT_NE(text.find("<function=get_weather>\n<parameter=city>\nParis\n</parameter>"), std::string::npos) << text;
  const ToolParse p = parse_checked(opts(ToolFormat::Xml), "", text);
  ASSERT_EQ(p.calls.size(), 2u) << text;
  EXPECT_EQ(p.calls[0].name, "get_weather");
  EXPECT_EQ(p.calls[0].arguments, R"({"city":"Paris","days":3})") << "days is an integer by the schema";
  EXPECT_EQ(p.calls[1].arguments, R"({"tz":"Europe/Paris"})");
  EXPECT_EQ(p.content, "I'll check.");
  EXPECT_EQ(p.note, "");
}

TEST(ToolCalls, XmlValuesConvertedByTheSchema) {
  const std::string text =
      "<tool_call>\n<function=typed>\n"
      "<parameter=s>\n123\n</parameter>\n<parameter=i>\n42\n</parameter>\n<parameter=n>\n2.5\n</parameter>\n"
      "<parameter=b>\ntrue\n</parameter>\n<parameter=o>\n{\"k\": [1, 2]}\n</parameter>\n"
      "<parameter=a>\n[\"x\", 1]\n</parameter>\n<parameter=z>\nnull\n</parameter>\n"
      "<parameter=maybe>\nnot a number\n</parameter>\n<parameter=sn>\nnull\n</parameter>\n"
      "<parameter=extra>\nline one\nline two\n</parameter>\n</function>\n</tool_call>";
  const ToolParse p = parse_checked(opts(ToolFormat::Xml), "", text);
  ASSERT_EQ(p.calls.size(), 1u) << p.note;
  EXPECT_EQ(p.calls[0].arguments,
            R"({"s":"123","i":42,"n":2.5,"b":true,"o":{"k":[1,2]},"a":["x",1],"z":null,"maybe":"not a number",)"
            R"("sn":null,"extra":"line one\nline two"})");
  EXPECT_EQ(convert_xml_parameter("7", ojson{{"type", "integer"}}), ojson(7));
  EXPECT_EQ(convert_xml_parameter("seven", ojson{{"type", "integer"}}), ojson("seven"));
  EXPECT_EQ(convert_xml_parameter("false", ojson{{"type", "boolean"}}), ojson(false));
  EXPECT_EQ(convert_xml_parameter(" 7 ", ojson{{"type", "string"}}), ojson(" 7 "));
  EXPECT_EQ(convert_xml_parameter("7", ojson()), ojson("7")) << "no schema: the text";
}

TEST(ToolCalls, XmlBrokenBlocksStayContent) {
  const ToolCallOptions o = opts(ToolFormat::Xml);
  for (const std::string& bad : {
           std::string("<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</tool_call>"),
           std::string("<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</function>\n</tool_call>"),
           std::string("<tool_call>\n<function=unknown_fn>\n</function>\n</tool_call>"),
           std::string("<tool_call>\nget_weather(city=Paris)\n</tool_call>"),
       }) {
    const ToolParse p = parse_checked(o, "", "Answer: " + bad);
    EXPECT_TRUE(p.calls.empty()) << bad;
    EXPECT_EQ(p.content, "Answer: " + bad);
    EXPECT_FALSE(p.note.empty()) << bad;
  }
}

TEST(ToolCalls, XmlFormatTakesAHermesBlockToo) {
  const ToolParse p = parse_checked(opts(ToolFormat::Xml), "",
                                    "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"tz\": \"UTC\"}}\n</tool_call>");
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].arguments, R"({"tz":"UTC"})");
}

TEST(ToolCalls, XmlInsideThink) {
  const std::string reasoning =
      "Need weather.\n\n<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n</parameter>\n</function>\n"
      "</tool_call>";
  const ToolParse p = parse_checked(opts(ToolFormat::Xml), reasoning, "\n");
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].arguments, R"({"city":"Oslo"})");
  EXPECT_EQ(p.reasoning, "Need weather.");
  EXPECT_EQ(p.content, "");
}

TEST(ToolCalls, NoFormatPassesTextThrough) {
  const std::string text = "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>";
  const ToolParse p = parse_checked(opts(ToolFormat::None), "r", text);
  EXPECT_TRUE(p.calls.empty());
  EXPECT_EQ(p.content, text);
  EXPECT_EQ(p.reasoning, "r");
}

TEST(ToolCalls, ResponseShape) {
  ojson resp = {{"choices", {{{"index", 0},
                              {"message", {{"role", "assistant"}, {"content", "x"}, {"reasoning_content", "r"}}},
                              {"finish_reason", "stop"}}}},
                {"dflash", ojson::object()}};
  ToolParse p;
  p.reasoning = "r2";
  p.calls.push_back({0, "call_a_0", "get_time", "{}"});
  apply_tool_parse(resp, p);
  const ojson& m = resp["choices"][0]["message"];
  EXPECT_TRUE(m["content"].is_null());
  EXPECT_EQ(m["reasoning_content"], "r2");
  EXPECT_EQ(m["tool_calls"][0]["id"], "call_a_0");
  EXPECT_EQ(m["tool_calls"][0]["type"], "function");
  EXPECT_EQ(m["tool_calls"][0]["function"]["arguments"], "{}");
  EXPECT_EQ(resp["choices"][0]["finish_reason"], "tool_calls");
  EXPECT_FALSE(resp["dflash"].contains("tool_parse"));

  const ojson d = tool_call_deltas_json({{1, "call_a_1", "f", "", true}, {1, "", "", "{\"k\":1}", false}});
  EXPECT_EQ(d[0], ojson::parse(R"({"index":1,"id":"call_a_1","type":"function","function":{"name":"f","arguments":""}})"));
  EXPECT_EQ(d[1], ojson::parse(R"({"index":1,"function":{"arguments":"{\"k\":1}"}})"));
}

// Random texts built from the pieces calls are made of (tags, whole calls, halves of tags,
// JSON, whitespace), streamed in random pieces: always the finished parse's result.
TEST(ToolCalls, RandomTextsStreamAsTheyParse) {
  const std::vector<std::string> bits = {
      "<tool_call>", "</tool_call>", "\n", " ", "  \n", "<tool", "_call>", "</tool", "<", "text", "é", "{",
      "}", "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"tz\": \"UTC\"}}\n</tool_call>",
      "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}", "{\"name\": \"nope\"}",
      "<function=get_weather>", "<parameter=city>", "\nParis\n", "</parameter>", "</function>",
      "<tool_call>\n<function=get_time>\n<parameter=tz>\nUTC\n</parameter>\n</function>\n</tool_call>"};
  std::mt19937 rng(1234);
  int with_calls = 0, with_notes = 0;
  for (int iter = 0; iter < 1500; ++iter) {
    ToolCallOptions o = opts(iter % 2 ? ToolFormat::Xml : ToolFormat::Hermes);
    o.parallel = iter % 3 != 0;
    o.incremental = iter % 4 >= 2;
    std::string reasoning, content;
    const int n = int(rng() % 12);
    for (int i = 0; i < n; ++i) (rng() % 3 == 0 ? reasoning : content) += bits[rng() % bits.size()];
    const ToolParse whole = parse_tool_calls(reasoning, content, o);
    with_calls += !whole.calls.empty();
    with_notes += !whole.note.empty();
    std::vector<std::pair<std::string, std::string>> pieces;
    for (size_t i = 0; i < reasoning.size();) {
      const size_t k = 1 + rng() % 7;
      pieces.push_back({reasoning.substr(i, k), ""});
      i += k;
    }
    for (size_t i = 0; i < content.size();) {
      const size_t k = 1 + rng() % 7;
      pieces.push_back({"", content.substr(i, k)});
      i += k;
    }
    expect_same(reassemble(o, pieces), whole, "random text " + std::to_string(iter) + ": [" + reasoning + "] [" + content + "]");
    if (HasFailure()) break;
  }
  EXPECT_GT(with_calls, 100) << "the pieces make calls often enough to test something";
  EXPECT_GT(with_notes, 100);
}

// tool_choice required / named: the grammar makes the calls whole, and their arguments stream
// as the model writes them (ToolCallOptions::incremental).
namespace {

ToolCallOptions forced(ToolFormat f) {
  ToolCallOptions o = opts(f);
  o.incremental = true;
  return o;
}

// The argument fragments of call 0 when the answer comes in 1-byte pieces.
std::vector<std::string> fragments(const ToolCallOptions& o, const std::string& content) {
  ToolCallStream s(o);
  std::vector<std::string> out;
  auto take = [&](const ToolStreamOut& so) {
    for (const ToolCallDelta& d : so.calls)
      if (d.index == 0 && !d.first) out.push_back(d.arguments);
  };
  for (char ch : content) take(s.push("", std::string(1, ch)));
  take(s.flush());
  return out;
}

const std::string kHermesForced =
    "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"S\\u00e3o \\\"P\\\" \\\\ x\", \"days\": 3}}\n"
    "</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>";
const std::string kXmlForced =
    "<tool_call>\n<function=get_weather>\n<parameter=city>\nS\xC3\xA3o \"P\" \\ <b>\nline 2\r\n</parameter>\n"
    "<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>\n<tool_call>\n<function=get_time>\n"
    "</function>\n</tool_call>";

}  // namespace

TEST(ToolCalls, ForcedHermesArgumentsStreamAsWritten) {
  const ToolParse p = parse_checked(forced(ToolFormat::Hermes), "", kHermesForced);
  ASSERT_EQ(p.calls.size(), 2u);
  EXPECT_EQ(p.calls[0].name, "get_weather");
  EXPECT_EQ(p.calls[0].arguments, R"({"city":"S\u00e3o \"P\" \\ x","days":3})") << "the model's text, less whitespace";
  EXPECT_EQ(p.calls[1].arguments, "{}");
  EXPECT_EQ(p.content, "");
  EXPECT_EQ(p.note, "");
  EXPECT_FALSE(p.cut);
  const std::vector<std::string> f = fragments(forced(ToolFormat::Hermes), kHermesForced);
  EXPECT_GT(f.size(), 10u) << "one fragment per byte of the arguments, nearly";
  // Auto mode: the same text, the same calls, the arguments in one piece.
  EXPECT_EQ(parse_checked(opts(ToolFormat::Hermes), "", kHermesForced).calls[0].arguments, p.calls[0].arguments);
  EXPECT_EQ(fragments(opts(ToolFormat::Hermes), kHermesForced).size(), 1u);
}

TEST(ToolCalls, ForcedXmlArgumentsStreamParameterByParameter) {
  const ToolParse p = parse_checked(forced(ToolFormat::Xml), "", kXmlForced);
  ASSERT_EQ(p.calls.size(), 2u);
  EXPECT_EQ(p.calls[0].arguments, "{\"city\":\"S\xC3\xA3o \\\"P\\\" \\\\ <b>\\nline 2\",\"days\":3}");
  EXPECT_EQ(ojson::parse(p.calls[0].arguments)["city"], "S\xC3\xA3o \"P\" \\ <b>\nline 2");
  EXPECT_EQ(p.calls[1].arguments, "{}");
  EXPECT_EQ(p.note, "");
  const std::vector<std::string> f = fragments(forced(ToolFormat::Xml), kXmlForced);
  EXPECT_GT(f.size(), 10u) << "a string parameter streams as it is written";
  EXPECT_EQ(parse_checked(opts(ToolFormat::Xml), "", kXmlForced).calls[0].arguments, p.calls[0].arguments);
  EXPECT_EQ(fragments(opts(ToolFormat::Xml), kXmlForced).size(), 1u);
}

TEST(ToolCalls, ForcedCallsAsTheTemplatesWriteThem) {
  for (const bool xml : {false, true}) {
    const std::string text = rendered_turn(xml ? qwen35_template() : qwen3_template(), "",
                                           {call("get_weather", {{"city", "Paris"}, {"days", 3}}),
                                            call("typed", {{"s", "a\tb"}, {"o", {{"k", {1, 2}}}}})});
    const ToolParse p = parse_checked(forced(xml ? ToolFormat::Xml : ToolFormat::Hermes), "", text);
    ASSERT_EQ(p.calls.size(), 2u) << text;
    EXPECT_EQ(p.calls[0].arguments, R"({"city":"Paris","days":3})") << text;
    EXPECT_EQ(ojson::parse(p.calls[1].arguments), ojson({{"s", "a\tb"}, {"o", {{"k", {1, 2}}}}}))
        << text;
    EXPECT_EQ(p.note, "") << text;
  }
}

TEST(ToolCalls, AForcedCallCutByMaxTokensKeepsItsArgumentsSoFar) {
  for (const bool xml : {false, true}) {
    const ToolCallOptions o = forced(xml ? ToolFormat::Xml : ToolFormat::Hermes);
    const std::string& whole = xml ? kXmlForced : kHermesForced;
    const std::string cut = whole.substr(0, whole.find("city") + (xml ? 8 : 10));  // in an escape, a UTF-8 char
    const ToolParse p = parse_checked(o, "", "Sure. " + cut);
    ASSERT_EQ(p.calls.size(), 1u);
    EXPECT_EQ(p.calls[0].name, "get_weather");
    EXPECT_TRUE(p.cut);
    EXPECT_EQ(p.content, "Sure.");
    EXPECT_NE(p.note.find("cut before </tool_call>"), std::string::npos) << p.note;
    ToolCallStream s(o);
    s.push("", cut);
    s.flush();
    EXPECT_TRUE(s.cut());
    // Every cut of the text: stream and finished parse agree (parse_checked), arguments only grow.
    std::string last;
    for (size_t i = 0; i <= whole.size(); ++i) {
      const ToolParse q = parse_checked(o, "", whole.substr(0, i));
      if (q.calls.empty()) continue;
      EXPECT_EQ(q.calls[0].arguments.compare(0, last.size(), last), 0) << i;
      last = q.calls[0].arguments;
    }
    // Cut before the name is known: text, as in auto mode.
    const std::string early = whole.substr(0, whole.find("get_weather") + 4);
    const ToolParse e = parse_checked(o, "", early);
    EXPECT_TRUE(e.calls.empty());
    EXPECT_EQ(e.content, early);
    EXPECT_NE(e.note.find("unclosed"), std::string::npos);
  }
}

TEST(ToolCalls, ForcedModeJudgesReasoningBlocksWhole) {
  const std::string reasoning = "Maybe <tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"tz\":";
  const ToolParse p = parse_checked(forced(ToolFormat::Hermes), reasoning, kHermesForced);
  EXPECT_EQ(p.reasoning, reasoning);
  EXPECT_EQ(p.calls.size(), 2u);
  // A block naming a function the request does not allow is judged whole: text.
  const std::string other = "<tool_call>\n{\"name\": \"rm_rf\", \"arguments\": {\"x\": 1}}\n</tool_call>";
  const ToolParse q = parse_checked(forced(ToolFormat::Hermes), "", other);
  EXPECT_TRUE(q.calls.empty());
  EXPECT_EQ(q.content, other);
}

// Random well-formed forced calls (strings with quotes, backslashes, newlines, '<', halves of
// the closing tags, UTF-8 and stray bytes; hermes with random whitespace): every split of the
// stream gives the finished parse, whose arguments are the JSON object written.
TEST(ToolCalls, RandomForcedCallsStreamAsTheyParse) {
  const std::vector<std::string> bits = {"a", " ", "\n", "\r", "<", "/", "\"", "\\", "\xC3\xA9", "\xC3", "\t",
                                         "</param", "</tool_c", "</function>", "{", "}", "\xE2\x82\xAC", "\xF9\xAF\xAF", "\xFE"};
  std::mt19937 rng(99);
  for (int iter = 0; iter < 120; ++iter) {
    std::string v;
    for (int i = int(rng() % 8); i > 0; --i) v += bits[rng() % bits.size()];
    const int days = int(rng() % 1000);
    const bool xml = iter % 2;
    std::string text;
    if (xml) {
      text = "<tool_call>\n<function=get_weather>\n<parameter=city>\n" + v + "\n</parameter>\n<parameter=days>\n" +
             std::to_string(days) + "\n</parameter>\n</function>\n</tool_call>";
    } else {
      const std::string ws[] = {"", " ", "\n  "};
      auto w = [&] { return ws[rng() % 3]; };
      text = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {" + w() + "\"city\"" + w() + ":" + w() +
             ojson(v).dump(-1, ' ', false, ojson::error_handler_t::replace) + "," + w() + "\"days\":" + w() +
             std::to_string(days) + w() + "}}\n</tool_call>";
    }
    const ToolParse p = parse_checked(forced(xml ? ToolFormat::Xml : ToolFormat::Hermes), "", text);
    ASSERT_EQ(p.calls.size(), 1u) << text;
    const ojson args = ojson::parse(p.calls[0].arguments, nullptr, false);
    ASSERT_TRUE(args.is_object()) << p.calls[0].arguments;
    EXPECT_EQ(args["days"], days) << text;
    std::string want = v;
    if (xml && !want.empty() && want.back() == '\r') want.pop_back();  // the line end the parser trims
    std::string probe = v;  // a stray byte becomes U+FFFD: compare only well-formed values
    for (size_t k; (k = probe.find("\xC3\xA9")) != std::string::npos;) probe.erase(k, 2);
    if (probe.find_first_of("\xC3\xF9\xFE") == std::string::npos) {
      EXPECT_EQ(args["city"], want) << text;
    }
    if (HasFailure()) break;
  }
}
