// Forced tool calls and response_format end to end below the HTTP layer: the constraint
// StructuredOutput builds, walked with random logits (the masked argmax at each step, as a
// model with no idea of JSON would), must produce text the tool-call parser takes as exactly
// the calls asked for, or JSON that parses, in both call forms, on the demo tokenizer.
#include <gtest/gtest.h>

#include <random>

#include "decoding/sampler.h"
#include "server/api_error.h"
#include "server/structured_output.h"

using namespace dflash;
using namespace dflash::server;
using ojson = nlohmann::ordered_json;

namespace {

const ojson kTools = ojson::parse(R"([
  {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
    "properties": {"city": {"type": "string", "maxLength": 12}, "unit": {"type": "string", "enum": ["c", "f"]},
                   "days": {"type": "integer", "minimum": 1, "maximum": 7}},
    "required": ["city", "unit"], "additionalProperties": false}}},
  {"type": "function", "function": {"name": "search", "parameters": {"type": "object",
    "properties": {"q": {"type": "string", "maxLength": 10}}, "required": ["q"]}}}
])");

Tokenizer demo_tokenizer() { return Tokenizer::from_folder(std::string(DFLASH_SOURCE_DIR) + "/models/demo/target"); }

size_t code_points(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

// Greedy over random logits under the constraint until a stop id; the generated text. The
// end of turn, and tokens that start with what closes a string or a tag, are favoured (by 8
// and by 3), so that walks end where the grammar lets them rather than writing strings forever.
std::string walk(TokenConstraint& c, const Tokenizer& tok, int vocab, const std::vector<int32_t>& stops, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> n(0, 1);
  std::vector<float> bias(static_cast<size_t>(vocab), 0.0f), logits(static_cast<size_t>(vocab));
  for (int t = 0; t < vocab; ++t)
    if (const std::string b = tok.token_bytes(t); !b.empty() && (b[0] == '"' || b[0] == '<')) bias[size_t(t)] = 3.0f;
  for (int32_t s : stops) bias[size_t(s)] = 8.0f;
  std::vector<int32_t> ids;
  for (int step = 0; step < 400; ++step) {
    for (int t = 0; t < vocab; ++t) logits[size_t(t)] = n(rng) + bias[size_t(t)];
    const uint64_t* allowed = c.allowed();
    // Where the value may end, end 3 times in 4: a greedy walk would otherwise often take a
    // token that runs past the end into another call (">\n" then "<tool_call>").
    const bool may_end = std::any_of(stops.begin(), stops.end(), [&](int32_t s) { return mask_allows(allowed, s); });
    const int32_t t = may_end && rng() % 4 != 0 ? stops[0] : argmax_allowed(logits.data(), vocab, allowed);
    EXPECT_TRUE(c.accept(t));
    if (std::find(stops.begin(), stops.end(), t) != stops.end()) return tok.decode(ids);
    ids.push_back(t);
  }
  ADD_FAILURE() << "no end within 400 tokens: " << tok.decode(ids);
  return tok.decode(ids);
}

}  // namespace

TEST(StructuredOutput, ForcedCallsParseAsTheCallsAskedForInBothForms) {
  const Tokenizer tok = demo_tokenizer();
  const int vocab = tok.vocab_size();
  const std::vector<int32_t> stops = tok.special().eos;
  ASSERT_FALSE(stops.empty());
  StructuredOutput so(tok, vocab, stops, ThinkTokens::from(tok));
  for (ToolFormat f : {ToolFormat::Hermes, ToolFormat::Xml}) {
    for (const std::string only : {"", "search"}) {
      for (bool parallel : {false, true}) {
        ForcedToolCall fc{f, kTools, only, parallel};
        for (uint32_t seed = 1; seed <= 6; ++seed) {
          auto c = so.for_tool_call(fc, ReasoningStart::None);
          const std::string text = walk(*c, tok, vocab, stops, seed);
          ToolCallOptions o;
          o.format = f;
          o.tools = kTools;
          o.only_function = only;
          o.parallel = parallel;
          o.id_base = "call_x";
          const ToolParse p = parse_tool_calls("", text, o);
          SCOPED_TRACE(std::string(tool_format_name(f)) + " only=" + only + " parallel=" + std::to_string(parallel) +
                      " text=" + text);
          ASSERT_GE(p.calls.size(), 1u);
          if (!parallel) {
            EXPECT_EQ(1u, p.calls.size());
          }
          EXPECT_EQ("", p.note);
          EXPECT_TRUE(p.content.find_first_not_of(" \n") == std::string::npos) << "text besides the calls";
          for (const ToolCall& call : p.calls) {
            if (!only.empty()) {
              EXPECT_EQ(only, call.name);
            }
            const ojson args = ojson::parse(call.arguments);
            if (call.name == "get_weather") {
              ASSERT_TRUE(args.contains("city") && args["city"].is_string());
              EXPECT_LE(code_points(args["city"].get<std::string>()), 12u);
              ASSERT_TRUE(args.contains("unit"));
              EXPECT_TRUE(args["unit"] == "c" || args["unit"] == "f") << args.dump();
              if (args.contains("days")) {
                EXPECT_TRUE(args["days"].is_number_integer() && args["days"] >= 1 && args["days"] <= 7);
              }
            } else {
              ASSERT_EQ("search", call.name);
              ASSERT_TRUE(args.contains("q") && args["q"].is_string());
            }
          }
        }
      }
    }
  }
}

TEST(StructuredOutput, JsonObjectAndSchemaOutputsParseAndBadSchemasAreRefused) {
  const Tokenizer tok = demo_tokenizer();
  const int vocab = tok.vocab_size();
  const std::vector<int32_t> stops = tok.special().eos;
  StructuredOutput so(tok, vocab, stops, ThinkTokens::from(tok));
  const ojson schema = ojson::parse(R"({"type": "object", "properties": {"n": {"type": "integer"},
      "s": {"type": "string", "maxLength": 6}}, "required": ["n", "s"], "additionalProperties": false})");
  const ojson rf = {{"type", "json_schema"}, {"json_schema", {{"name", "x"}, {"schema", schema}}}};
  for (uint32_t seed = 1; seed <= 8; ++seed) {
    auto c = so.for_response_format(rf, ReasoningStart::None);
    const ojson v = ojson::parse(walk(*c, tok, vocab, stops, seed));
    EXPECT_TRUE(v["n"].is_number_integer() && v["s"].is_string()) << v.dump();
    auto o = so.for_response_format(ojson{{"type", "json_object"}}, ReasoningStart::None);
    EXPECT_TRUE(ojson::parse(walk(*o, tok, vocab, stops, seed + 100)).is_object());
  }
  const ojson bad = {{"type", "json_schema"}, {"json_schema", {{"schema", {{"type", "string"}, {"not", {{"const", "a"}}}}}}}};
  try {
    so.for_response_format(bad, ReasoningStart::None);
    ADD_FAILURE() << "a schema with 'not' was accepted";
  } catch (const ApiError& e) {
    EXPECT_EQ(400, e.status());
    EXPECT_NE(std::string(e.what()).find("not"), std::string::npos) << e.what();
  }
}

TEST(StructuredOutput, ReasoningStartFollowsThePromptsEnd) {
  const Tokenizer tok = demo_tokenizer();
  const ThinkTokens think = ThinkTokens::from(tok);
  ASSERT_TRUE(think.known()) << "the demo tokenizer has <think> and </think>";
  const std::vector<int32_t> head = tok.encode("<|im_start|>assistant\n");
  EXPECT_EQ(ReasoningStart::MayOpen, reasoning_start(head, tok, think));
  std::vector<int32_t> open = head;
  open.push_back(*think.open);
  open.push_back(tok.encode("\n")[0]);
  EXPECT_EQ(ReasoningStart::Open, reasoning_start(open, tok, think));
  const std::vector<int32_t> closed = tok.encode("<|im_start|>assistant\n<think>\n\n</think>\n\n");
  EXPECT_EQ(ReasoningStart::None, reasoning_start(closed, tok, think));
  EXPECT_EQ(ReasoningStart::None, reasoning_start(head, tok, ThinkTokens{}));
}

// tool_choice "auto": free text, then "<tool_call>" (spelled by the model in whatever tokens),
// then the block under the call grammar. Walked with random logits from there, every block is a
// valid call to an offered function and the text before it stays content, in both forms; the
// streamed parse (incremental, as the server runs it) gives the same calls.
TEST(StructuredOutput, AutoModeBlocksAfterTheTagAreValidCalls) {
  const Tokenizer tok = demo_tokenizer();
  const int vocab = tok.vocab_size();
  const std::vector<int32_t> stops = tok.special().eos;
  StructuredOutput so(tok, vocab, stops, ThinkTokens::from(tok));
  for (ToolFormat f : {ToolFormat::Hermes, ToolFormat::Xml}) {
    for (uint32_t seed = 1; seed <= 6; ++seed) {
      auto c = so.for_tool_trigger(ForcedToolCall{f, kTools, "", true}, ReasoningStart::None);
      const std::string prefix = "Let me check.\n<tool_call>";
      for (int32_t t : tok.encode(prefix)) {
        EXPECT_EQ(nullptr, c->allowed()) << "free text before the tag";
        ASSERT_TRUE(c->accept(t));
      }
      ASSERT_NE(nullptr, c->allowed()) << "the tag starts the call grammar";
      const std::string text = prefix + walk(*c, tok, vocab, stops, seed);
      ToolCallOptions o;
      o.format = f;
      o.tools = kTools;
      o.id_base = "call_x";
      o.incremental = true;
      const ToolParse p = parse_tool_calls("", text, o);
      SCOPED_TRACE(std::string(tool_format_name(f)) + " text=" + text);
      ASSERT_GE(p.calls.size(), 1u);
      EXPECT_EQ("Let me check.", p.content.substr(0, 13));
      EXPECT_FALSE(p.cut);
      for (const ToolCall& call : p.calls) {
        const ojson args = ojson::parse(call.arguments);
        EXPECT_TRUE(call.name == "get_weather" ? args.contains("city") && args.contains("unit") : args.contains("q"))
            << call.name << " " << call.arguments;
      }
      ToolCallStream s(o);
      std::vector<ToolCallDelta> deltas;
      for (size_t i = 0; i < text.size(); i += 3) {
        ToolStreamOut out = s.push("", text.substr(i, 3));
        deltas.insert(deltas.end(), out.calls.begin(), out.calls.end());
      }
      ToolStreamOut out = s.flush();
      deltas.insert(deltas.end(), out.calls.begin(), out.calls.end());
      std::vector<std::string> args(p.calls.size());
      int heads = 0;
      for (const ToolCallDelta& d : deltas) {
        ASSERT_LT(size_t(d.index), args.size());
        heads += d.first;
        if (d.first) {
          EXPECT_EQ(p.calls[size_t(d.index)].name, d.name);
        }
        args[size_t(d.index)] += d.arguments;
      }
      EXPECT_EQ(int(p.calls.size()), heads);
      for (size_t i = 0; i < args.size(); ++i) EXPECT_EQ(p.calls[i].arguments, args[i]) << "call " << i;
    }
  }
}
