// Qwen3.5's template opens the thought itself: its generation prompt ends in "<think>\n" (and in
// "<think>\n\n</think>\n\n" with enable_thinking=false), so the model's first tokens are already
// reasoning. These tests render that prompt, then feed a scripted model output through the same
// pieces Engine::generate uses (prompt_opens_think, ReasoningSplitter, ThinkCap,
// think_close_tokens), in the order it uses them, and check where each part lands.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "../tokenizer/tiny_tokenizer.h"
#include "chat/chat_template.h"
#include "server/reasoning.h"
#include "server/think_cap.h"
#include "tokenizer/tokenizer.h"

namespace dflash::server {
namespace {

using json = nlohmann::ordered_json;

constexpr int32_t kOpen = 401, kClose = 407;  // tiny's <think>, and the </think> added here

const Tokenizer& tokenizer() {
  static const Tokenizer tok = [] {
    auto tj = tiny::tokenizer_json();
    tj["added_tokens"].push_back({{"id", kClose}, {"content", "</think>"}, {"single_word", false},
                                  {"lstrip", false}, {"rstrip", false}, {"normalized", false},
                                  {"special", false}});
    return Tokenizer::from_json(tj.dump(), tiny::config_json().dump());
  }();
  return tok;
}

std::string qwen35_prompt(const json& extra) {
  std::ifstream in(std::string(DFLASH_SOURCE_DIR) + "/tests/oracle/chat_templates/qwen3.5.jinja");
  std::stringstream src;
  src << in.rdbuf();
  json ctx = {{"messages", {{{"role", "user"}, {"content", "What is 2 + 2?"}}}}, {"add_generation_prompt", true}};
  ctx.update(extra);
  return ChatTemplate(src.str()).render(ctx);
}

// What a request's generation delivered, both channels whole.
struct Outcome {
  Delta out;
  std::vector<int32_t> ids;
  bool capped = false;
};

// Engine::generate's reasoning and think-cap handling with a scripted model: `model` is what the
// model would generate from the prompt (it is cut at each segment's budget, and after a forced
// "</think>\n\n" it goes on with `after_forced`).
Outcome generate(const std::vector<int32_t>& prompt, const std::vector<int32_t>& model,
             const std::vector<int32_t>& after_forced, int think_cap, int max_tokens) {
  const Tokenizer& tok = tokenizer();
  const ThinkTokens think = ThinkTokens::from(tok);
  ReasoningSplitter split(tok, think, /*split=*/true, prompt_opens_think(prompt, think));
  ThinkCap cap(think_cap, max_tokens, think.known());
  Outcome r;
  const std::vector<int32_t>* source = &model;
  size_t next = 0;
  for (bool done = false; !done;) {
    const int used = int(r.ids.size());
    const int budget = cap.budget(used);
    int n = 0;
    for (; n < budget && next < source->size(); ++n, ++next) {
      r.ids.push_back((*source)[next]);
      r.out.append(split.push((*source)[next]));
    }
    done = true;
    const bool at_length = n == budget;  // the segment ran out of tokens, not into an end
    if (at_length && cap.ended_at_cap(int(r.ids.size()))) {
      cap.disarm();
      if (split.in_think()) {
        const auto forced = think_close_tokens(tok);
        if (int(r.ids.size() + forced.size()) > max_tokens) break;
        r.capped = true;
        for (int32_t id : forced) {
          r.ids.push_back(id);
          r.out.append(split.push(id));
        }
        source = &after_forced;
        next = 0;
      }
      done = int(r.ids.size()) >= max_tokens;
    }
  }
  r.out.append(split.flush());
  return r;
}

std::vector<int32_t> ids(const std::string& text) { return tokenizer().encode(text); }

std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

TEST(Qwen35Reasoning, TheTemplatesPromptOpensTheThought) {
  const ThinkTokens think = ThinkTokens::from(tokenizer());
  ASSERT_EQ(think.open, kOpen);
  ASSERT_EQ(think.close, kClose);
  const std::string on = qwen35_prompt(json::object());
  ASSERT_EQ(on.substr(on.size() - 8), "<think>\n");
  const auto prompt = ids(on);
  EXPECT_EQ(prompt[prompt.size() - 2], kOpen);  // "<think>" is one token, "\n" follows it
  EXPECT_TRUE(prompt_opens_think(prompt, think));
  EXPECT_TRUE(prompt_opens_think(ids(qwen35_prompt({{"enable_thinking", true}})), think));
  EXPECT_FALSE(prompt_opens_think(ids(qwen35_prompt({{"enable_thinking", false}})), think));
  // History with closed thoughts before the open one: the last marker decides.
  json history = {{"messages",
                   {{{"role", "user"}, {"content", "a"}},
                    {{"role", "assistant"}, {"content", "b"}, {"reasoning_content", "r"}},
                    {{"role", "user"}, {"content", "c"}}}}};
  EXPECT_TRUE(prompt_opens_think(ids(qwen35_prompt(history)), think));
}

TEST(Qwen35Reasoning, OutputUpToTheCloseIsReasoningTheRestIsContent) {
  const auto prompt = ids(qwen35_prompt(json::object()));
  const auto model = concat(concat(ids("Add them.\n2 + 2 = 4.\n"), {kClose}), ids("\n\nThe answer is 4."));
  const Outcome r = generate(prompt, model, {}, /*think_cap=*/0, /*max_tokens=*/200);
  EXPECT_EQ(r.out.reasoning, "Add them.\n2 + 2 = 4.");
  EXPECT_EQ(r.out.content, "The answer is 4.");
  EXPECT_FALSE(r.capped);
  EXPECT_EQ(r.ids, model);
}

TEST(Qwen35Reasoning, WithThinkingOffEverythingIsContent) {
  const auto prompt = ids(qwen35_prompt({{"enable_thinking", false}}));
  const Outcome r = generate(prompt, ids("The answer is 4."), {}, /*think_cap=*/3, /*max_tokens=*/200);
  EXPECT_EQ(r.out.reasoning, "");
  EXPECT_EQ(r.out.content, "The answer is 4.");
  EXPECT_FALSE(r.capped);  // the cap only closes a thought that is open
}

TEST(Qwen35Reasoning, TheCapForcesTheCloseAfterExactlyCapTokens) {
  const auto prompt = ids(qwen35_prompt(json::object()));
  const auto thinking = ids("ACDFGIJKMNPQRSTUVWXYZ01234");  // one token a character (no merges)
  ASSERT_EQ(thinking.size(), 26u);
  const Outcome r = generate(prompt, thinking, ids("Four."), /*think_cap=*/10, /*max_tokens=*/200);
  EXPECT_TRUE(r.capped);
  const auto forced = think_close_tokens(tokenizer());
  ASSERT_FALSE(forced.empty());
  EXPECT_EQ(forced[0], kClose);
  ASSERT_GT(r.ids.size(), 10u);
  EXPECT_EQ(r.ids[10], kClose);  // token 10 (the 11th) is the forced </think>
  EXPECT_EQ(std::vector<int32_t>(r.ids.begin() + 10, r.ids.begin() + 10 + long(forced.size())), forced);
  EXPECT_EQ(r.out.reasoning, "ACDFGIJKMN");
  EXPECT_EQ(r.out.content, "Four.");
}

TEST(Qwen35Reasoning, AThoughtThatClosesBeforeTheCapIsLeftAlone) {
  const auto prompt = ids(qwen35_prompt(json::object()));
  const auto model = concat(concat(ids("AB"), {kClose}), ids("\n\nxyz uvw"));
  const Outcome r = generate(prompt, model, {}, /*think_cap=*/5, /*max_tokens=*/200);
  EXPECT_FALSE(r.capped);
  EXPECT_EQ(r.ids, model);  // the first segment ends at the cap with the thought closed: no forcing
  EXPECT_EQ(r.out.reasoning, "AB");
  EXPECT_EQ(r.out.content, "xyz uvw");
}

TEST(Qwen35Reasoning, NoForcingWhenMaxTokensEndsTheThoughtFirst) {
  const auto prompt = ids(qwen35_prompt(json::object()));
  const Outcome r = generate(prompt, ids("ACDFGIJKMN"), ids("X"), /*think_cap=*/8, /*max_tokens=*/6);
  EXPECT_FALSE(r.capped);
  EXPECT_EQ(r.ids.size(), 6u);
  EXPECT_EQ(r.out.reasoning, "ACDFGI");
  EXPECT_EQ(r.out.content, "");
}

}  // namespace
}  // namespace dflash::server
