// The gate that leaves reasoning free: which tokens it allows in each phase, and that its
// inner constraint sees exactly the answer's tokens.
#include <gtest/gtest.h>

#include "decoding/reasoning_gate.h"

using namespace dflash;

namespace {
constexpr int kVocab = 130;  // three bitset words, the last one partial
constexpr int32_t kOpen = 121, kClose = 123;  // odd: outside the inner set

// Allows only even ids; records what it was given.
class EvenOnly : public TokenConstraint {
 public:
  EvenOnly() : bits_(size_t(kVocab + 63) / 64, 0) {
    for (int t = 0; t < kVocab; t += 2) bits_[size_t(t) / 64] |= uint64_t(1) << (t % 64);
  }
  const uint64_t* allowed() override { return bits_.data(); }
  bool accept(int32_t t) override {
    if (t % 2 != 0) return false;
    seen.push_back(t);
    return true;
  }
  std::unique_ptr<TokenConstraint> clone() const override { return std::make_unique<EvenOnly>(*this); }
  std::vector<int32_t> seen;

 private:
  std::vector<uint64_t> bits_;
};

std::vector<int32_t> allowed_ids(TokenConstraint& c) {
  const uint64_t* b = c.allowed();
  std::vector<int32_t> ids;
  for (int t = 0; t < kVocab; ++t)
    if (mask_allows(b, t)) ids.push_back(t);
  return ids;
}
}  // namespace

TEST(ReasoningGate, ThinkingIsFreeAndTheAnswerIsConstrained) {
  auto inner = std::make_unique<EvenOnly>();
  EvenOnly* in = inner.get();
  ReasoningGate g(std::move(inner), kVocab, kOpen, kClose, /*starts_in_think=*/false);
  auto start = allowed_ids(g);
  EXPECT_EQ(size_t(kVocab / 2 + 1), start.size()) << "the even ids and the open marker";
  EXPECT_TRUE(std::find(start.begin(), start.end(), kOpen) != start.end());
  EXPECT_FALSE(g.accept(3)) << "an odd first token is neither the answer nor a think block";
  ASSERT_TRUE(g.accept(kOpen));
  EXPECT_EQ(size_t(kVocab), allowed_ids(g).size()) << "inside reasoning every token is allowed";
  for (int32_t t : {3, 5, 7, kOpen}) EXPECT_TRUE(g.accept(t));
  EXPECT_EQ(ReasoningGate::Phase::Thinking, g.phase());
  ASSERT_TRUE(g.accept(kClose));
  EXPECT_EQ(ReasoningGate::Phase::Answer, g.phase());
  EXPECT_EQ(size_t(kVocab / 2), allowed_ids(g).size());
  EXPECT_FALSE(g.accept(9));
  EXPECT_TRUE(g.accept(10));
  EXPECT_EQ(std::vector<int32_t>{10}, in->seen) << "the inner constraint sees the answer only";
}

TEST(ReasoningGate, AnAnswerWithoutThinkingStartsConstrainedAndClonesAreIndependent) {
  ReasoningGate g(std::make_unique<EvenOnly>(), kVocab, kOpen, kClose, false);
  ASSERT_TRUE(g.accept(4));
  EXPECT_EQ(ReasoningGate::Phase::Answer, g.phase());
  EXPECT_FALSE(g.accept(kOpen)) << "once the answer started the think markers are plain tokens";
  ReasoningGate pre(std::make_unique<EvenOnly>(), kVocab, kOpen, kClose, /*starts_in_think=*/true);
  auto copy = pre.clone();
  ASSERT_TRUE(copy->accept(kClose));
  EXPECT_EQ(ReasoningGate::Phase::Thinking, pre.phase()) << "a clone moves alone";
  EXPECT_EQ(size_t(kVocab / 2), allowed_ids(*copy).size());
  ReasoningGate none(std::make_unique<EvenOnly>(), kVocab, std::nullopt, std::nullopt, true);
  EXPECT_EQ(ReasoningGate::Phase::Answer, none.phase()) << "a model without think tokens answers at once";
}
