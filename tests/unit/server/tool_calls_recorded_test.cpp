// The tool-call parser on outputs recorded from models (tests/data/tool_calls/recorded.json:
// raw generated text of the shipped demo models, with the request and the server's response
// it came from). No real Qwen model can be downloaded here, so these are the demo models'
// outputs: a hermes call decoded under the auto-mode grammar with text after it, the same
// request decoded free (a broken block that never closes), and an XML forced call after
// reasoning, parallel, the second call cut by max_tokens. Each is parsed whole and streamed in
// pieces of every size from 1 to 7 bytes and at every single split point: the calls, their
// arguments and the content must be what the server returned, the same every way.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "server/tool_calls.h"

using namespace dflash::server;
using ojson = nlohmann::ordered_json;

namespace {

ojson recorded() {
  std::ifstream in(std::string(DFLASH_SOURCE_DIR) + "/tests/data/tool_calls/recorded.json");
  std::stringstream ss;
  ss << in.rdbuf();
  return ojson::parse(ss.str());
}

ToolCallOptions options_of(const ojson& r) {
  ToolCallOptions o;
  o.format = r["format"] == "xml" ? ToolFormat::Xml : ToolFormat::Hermes;
  o.tools = r["tools"];
  o.incremental = r["incremental"].get<bool>();
  o.id_base = "call_rec";
  return o;
}

struct Streamed {
  std::string reasoning, content;
  std::vector<ToolCall> calls;
};

// Feeds reasoning then content to a ToolCallStream in pieces cut at `cuts` (offsets into the
// concatenation), and reassembles the deltas as a client does.
Streamed stream(const ojson& r, const std::vector<size_t>& cuts) {
  ToolCallStream s(options_of(r));
  const std::string reasoning = r["reasoning"], content = r["content"];
  const std::string all = reasoning + content;
  Streamed out;
  auto take = [&](const ToolStreamOut& o) {
    out.reasoning += o.reasoning;
    out.content += o.content;
    for (const ToolCallDelta& d : o.calls) {
      if (size_t(d.index) >= out.calls.size()) out.calls.resize(size_t(d.index) + 1);
      ToolCall& c = out.calls[size_t(d.index)];
      c.index = d.index;
      if (d.first) c.id = d.id, c.name = d.name;
      c.arguments += d.arguments;
    }
  };
  size_t at = 0;
  for (size_t k = 0; k <= cuts.size(); ++k) {
    const size_t end = k < cuts.size() ? cuts[k] : all.size();
    const size_t r0 = std::min(at, reasoning.size()), r1 = std::min(end, reasoning.size());
    const std::string rp = reasoning.substr(r0, r1 - r0);
    const std::string cp = end > reasoning.size() ? all.substr(std::max(at, reasoning.size()), end - std::max(at, reasoning.size())) : "";
    take(s.push(rp, cp));
    at = end;
  }
  take(s.flush());
  return out;
}

}  // namespace

TEST(ToolCallsRecorded, DemoModelOutputsParseAsTheServerReturnedThem) {
  const ojson recs = recorded();
  ASSERT_EQ(3u, recs.size());
  for (const ojson& r : recs) {
    SCOPED_TRACE(r["name"].get<std::string>());
    const ToolParse p = parse_tool_calls(r["reasoning"], r["content"], options_of(r));
    const ojson& resp = r["server_response"];
    const std::string name = r["name"];
    if (name == "qwen3-demo-hermes-free") {
      // tool_choice none on the server; parsed here as auto without the grammar: the block
      // the model opened never closes, so everything stays text and the reason is noted.
      EXPECT_TRUE(p.calls.empty());
      EXPECT_EQ(r["content"].get<std::string>().substr(0, 11), p.content.substr(0, 11));
      EXPECT_NE(std::string::npos, p.note.find("<tool_call>")) << p.note;
    } else {
      const ojson& want = resp["message"]["tool_calls"];
      ASSERT_EQ(want.size(), p.calls.size());
      for (size_t i = 0; i < p.calls.size(); ++i) {
        EXPECT_EQ(want[i]["function"]["name"].get<std::string>(), p.calls[i].name);
        EXPECT_EQ(want[i]["function"]["arguments"].get<std::string>(), p.calls[i].arguments);
      }
      const std::string content = resp["message"]["content"].is_null() ? "" : resp["message"]["content"].get<std::string>();
      EXPECT_EQ(content, p.content);
      EXPECT_EQ(resp["finish_reason"] == "length", p.cut);
    }
    const std::string all = r["reasoning"].get<std::string>() + r["content"].get<std::string>();
    auto same = [&](const Streamed& s, const std::string& how) {
      ASSERT_EQ(p.calls.size(), s.calls.size()) << how;
      for (size_t i = 0; i < p.calls.size(); ++i) {
        EXPECT_EQ(p.calls[i].name, s.calls[i].name) << how;
        EXPECT_EQ(p.calls[i].arguments, s.calls[i].arguments) << how;
        EXPECT_EQ("call_rec_" + std::to_string(i), s.calls[i].id) << how;
      }
      EXPECT_EQ(p.content, s.content) << how;
    };
    for (size_t piece = 1; piece <= 7; ++piece) {
      std::vector<size_t> cuts;
      for (size_t c = piece; c < all.size(); c += piece) cuts.push_back(c);
      same(stream(r, cuts), "pieces of " + std::to_string(piece));
    }
    for (size_t c = 1; c < all.size(); ++c) same(stream(r, {c}), "split at " + std::to_string(c));
  }
}
