// TriggeredConstraint (the auto-mode tool-call grammar): free text is unconstrained (a null
// mask, so it samples exactly as without a constraint), the trigger is found across token
// boundaries and inside a token that runs past it, the block after it follows the grammar and
// the answer is free again once the grammar is complete, reasoning stays free, and a clone
// walks on its own.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "decoding/grammar/grammar.h"
#include "decoding/grammar/grammar_constraint.h"
#include "decoding/triggered_constraint.h"

namespace {

using namespace dflash;

// Ids: 0 "<tool", 1 "_call>", 2 "<tool_call>", 3 "<tool_call>\n", 4 "\n", 5 "{\"f\": ", 6 "1", 7 "2",
// 8 "}\n</tool_call>", 9 "hi", 10 "<think>", 11 "</think>", 12 "<eos>" (control: no bytes),
// 13 "x", 14 "<tool_call>x", 15 "}", 16 "\n</tool_call>".
const std::vector<std::string> kVocab = {"<tool", "_call>", "<tool_call>", "<tool_call>\n", "\n", "{\"f\": ", "1", "2",
                                         "}\n</tool_call>", "hi", "<think>", "</think>", "", "x", "<tool_call>x",
                                         "}", "\n</tool_call>"};
constexpr int32_t kThinkOpen = 10, kThinkClose = 11, kEos = 12;

struct Fixture {
  std::shared_ptr<const TokenTable> table = std::make_shared<const TokenTable>(kVocab);
  std::shared_ptr<const Grammar> grammar;
  std::shared_ptr<MaskCache> cache;
  Fixture() {
    // After the trigger: "\n{\"f\": " then 1 or 2 digits, then "}\n</tool_call>".
    GrammarBuilder b;
    const auto digit = b.byte_range('1', '2');
    grammar = b.build(b.seq({b.literal("\n{\"f\": "), b.repeat(digit, 1, 2), b.literal("}\n</tool_call>")}));
    cache = std::make_shared<MaskCache>(grammar, table);
  }
  TriggeredConstraint make(bool think, bool starts_in_think = false) const {
    auto body = std::make_unique<GrammarConstraint>(grammar, table, cache, std::vector<int32_t>{kEos});
    return TriggeredConstraint(std::move(body), table, "<tool_call>", think ? std::optional<int32_t>(kThinkOpen) : std::nullopt,
                               think ? std::optional<int32_t>(kThinkClose) : std::nullopt, starts_in_think);
  }
};

std::vector<int32_t> allowed_ids(TokenConstraint& c) {
  const uint64_t* bits = c.allowed();
  std::vector<int32_t> ids;
  for (int32_t t = 0; t < int32_t(kVocab.size()); ++t)
    if (mask_allows(bits, t)) ids.push_back(t);
  return ids;
}

TEST(TriggeredConstraint, FreeUntilTheTriggerThenTheGrammarThenFreeAgain) {
  Fixture f;
  TriggeredConstraint c = f.make(false);
  EXPECT_EQ(nullptr, c.allowed()) << "free text: no mask, sampled as without a constraint";
  ASSERT_TRUE(c.accept(9));
  ASSERT_TRUE(c.accept(0));  // "<tool": not yet
  EXPECT_EQ(TriggeredConstraint::Phase::Free, c.phase());
  EXPECT_EQ(nullptr, c.allowed());
  ASSERT_TRUE(c.accept(1));  // "_call>": the trigger, spelled in two tokens
  EXPECT_EQ(TriggeredConstraint::Phase::Inside, c.phase());
  EXPECT_EQ(std::vector<int32_t>({4}), allowed_ids(c)) << "only the grammar's next bytes";
  EXPECT_FALSE(c.accept(9)) << "text the grammar refuses";
  ASSERT_TRUE(c.accept(4));
  ASSERT_TRUE(c.accept(5));
  EXPECT_EQ(std::vector<int32_t>({6, 7}), allowed_ids(c));
  ASSERT_TRUE(c.accept(6));
  EXPECT_EQ(std::vector<int32_t>({6, 7, 8, 15}), allowed_ids(c)) << "a second digit or the close";
  EXPECT_FALSE(c.accept(kEos)) << "no stopping inside a call";
  ASSERT_TRUE(c.accept(8));
  EXPECT_EQ(TriggeredConstraint::Phase::Free, c.phase()) << "the grammar is complete: free again";
  EXPECT_EQ(nullptr, c.allowed());
  ASSERT_TRUE(c.accept(2));  // a second call, the trigger as one token
  EXPECT_EQ(TriggeredConstraint::Phase::Inside, c.phase());
  EXPECT_EQ(2, c.triggers());
}

TEST(TriggeredConstraint, ATokenThatRunsPastTheTriggerStartsTheGrammarWithItsRest) {
  Fixture f;
  TriggeredConstraint c = f.make(false);
  ASSERT_TRUE(c.accept(3));  // "<tool_call>\n"
  EXPECT_EQ(TriggeredConstraint::Phase::Inside, c.phase());
  EXPECT_EQ(std::vector<int32_t>({5}), allowed_ids(c)) << "the newline was already taken";

  // "<tool_call>x": the grammar cannot take the x, so the block stays free text.
  TriggeredConstraint d = f.make(false);
  ASSERT_TRUE(d.accept(14));
  EXPECT_EQ(TriggeredConstraint::Phase::Free, d.phase());
  EXPECT_EQ(nullptr, d.allowed());
  EXPECT_EQ(0, d.triggers());
}

TEST(TriggeredConstraint, AControlTokenBreaksAPartialTrigger) {
  Fixture f;
  TriggeredConstraint c = f.make(false);
  ASSERT_TRUE(c.accept(0));     // "<tool"
  ASSERT_TRUE(c.accept(kEos));  // no bytes: text does not run across it
  ASSERT_TRUE(c.accept(1));     // "_call>"
  EXPECT_EQ(TriggeredConstraint::Phase::Free, c.phase());
}

TEST(TriggeredConstraint, ReasoningStaysFreeAndTheAnswerIsWatched) {
  Fixture f;
  TriggeredConstraint c = f.make(true);
  ASSERT_TRUE(c.accept(kThinkOpen));
  EXPECT_EQ(TriggeredConstraint::Phase::Thinking, c.phase());
  ASSERT_TRUE(c.accept(2));  // a call written while thinking: the parser judges it whole
  EXPECT_EQ(TriggeredConstraint::Phase::Thinking, c.phase());
  EXPECT_EQ(nullptr, c.allowed());
  ASSERT_TRUE(c.accept(9));
  ASSERT_TRUE(c.accept(kThinkClose));
  EXPECT_EQ(TriggeredConstraint::Phase::Free, c.phase());
  ASSERT_TRUE(c.accept(2));
  EXPECT_EQ(TriggeredConstraint::Phase::Inside, c.phase());

  TriggeredConstraint open = f.make(true, /*starts_in_think=*/true);
  EXPECT_EQ(TriggeredConstraint::Phase::Thinking, open.phase()) << "the prompt opened the block";
  TriggeredConstraint no_think = f.make(true);
  ASSERT_TRUE(no_think.accept(9));
  EXPECT_EQ(TriggeredConstraint::Phase::Free, no_think.phase()) << "an answer that did not open a think block";
}

TEST(TriggeredConstraint, ACloneWalksOnItsOwn) {
  Fixture f;
  TriggeredConstraint c = f.make(false);
  ASSERT_TRUE(c.accept(0));
  std::unique_ptr<TokenConstraint> d = c.clone();
  ASSERT_TRUE(d->accept(1));  // the clone completes the trigger the original started
  EXPECT_EQ(std::vector<int32_t>({4}), allowed_ids(*d));
  EXPECT_EQ(nullptr, c.allowed()) << "the original has not moved";
  ASSERT_TRUE(c.accept(9));
  ASSERT_TRUE(c.accept(1));
  EXPECT_EQ(TriggeredConstraint::Phase::Free, c.phase()) << "\"<toolhi_call>\" is no trigger";
  std::unique_ptr<TokenConstraint> e = d->clone();
  ASSERT_TRUE(e->accept(4));
  EXPECT_EQ(std::vector<int32_t>({4}), allowed_ids(*d)) << "the inside grammar is copied, not shared";
}

}  // namespace
