// Tool-call history from OpenAI clients: a call's arguments arrive as a JSON string and reach
// the chat template as the object it encodes (Qwen3.5's template iterates them with |items);
// a string that is not a JSON object stays a string.
#include <gtest/gtest.h>

#include "server/openai_protocol.h"

using namespace dflash;
using namespace dflash::server;

TEST(ToolHistory, ArgumentStringsBecomeObjects) {
  const ojson body = ojson::parse(R"({"messages": [
    {"role": "user", "content": "weather?"},
    {"role": "assistant", "content": null, "tool_calls": [
      {"id": "c1", "type": "function", "function": {"name": "get", "arguments": "{\"city\":\"Oslo\",\"days\":2}"}},
      {"id": "c2", "type": "function", "function": {"name": "raw", "arguments": "not json"}},
      {"id": "c3", "type": "function", "function": {"name": "list", "arguments": "[1,2]"}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "sunny"}]})");
  const ApiRequest r = parse_chat_request(body, SamplingParams{});
  const ojson& calls = r.messages[1]["tool_calls"];
  ASSERT_TRUE(calls[0]["function"]["arguments"].is_object());
  EXPECT_EQ("Oslo", calls[0]["function"]["arguments"]["city"]);
  EXPECT_EQ(2, calls[0]["function"]["arguments"]["days"]);
  // Key order is the client's (ordered JSON), so the rendering follows it.
  EXPECT_EQ("city", calls[0]["function"]["arguments"].begin().key());
  EXPECT_EQ("not json", calls[1]["function"]["arguments"]);
  EXPECT_EQ("[1,2]", calls[2]["function"]["arguments"]);
}
