// The grammar builder and the byte-level pushdown matcher.
#include <gtest/gtest.h>

#include <string>

#include "decoding/grammar/grammar.h"
#include "decoding/grammar/grammar_matcher.h"
#include "util/error.h"

namespace {

using dflash::ByteSet;
using dflash::GrammarBuilder;
using dflash::GrammarMatcher;
using Expr = GrammarBuilder::Expr;

bool full_match(const std::shared_ptr<const dflash::Grammar>& g, const std::string& s) {
  GrammarMatcher m(g);
  return m.accept_bytes(s) && m.can_end();
}

bool prefix_ok(const std::shared_ptr<const dflash::Grammar>& g, const std::string& s) {
  GrammarMatcher m(g);
  return m.accept_bytes(s);
}

TEST(GrammarMatcher, LiteralsAndSequences) {
  GrammarBuilder b;
  auto g = b.build(b.seq({b.literal("ab"), b.literal("c")}));
  EXPECT_TRUE(full_match(g, "abc"));
  EXPECT_FALSE(full_match(g, "ab"));
  EXPECT_TRUE(prefix_ok(g, "ab"));
  EXPECT_FALSE(prefix_ok(g, "abd"));
  EXPECT_FALSE(full_match(g, "abcc"));
  GrammarMatcher m(g);
  EXPECT_FALSE(m.can_end());
  EXPECT_TRUE(m.accept_bytes("abc"));
  EXPECT_TRUE(m.can_end());
  EXPECT_FALSE(m.accept_byte('x'));
  EXPECT_TRUE(m.dead());
}

TEST(GrammarMatcher, ClassesAlternationNegation) {
  GrammarBuilder b;
  auto digit = b.byte_range('0', '9');
  auto not_quote = b.byte_class(ByteSet().add('"').negated());
  auto g = b.build(b.alt({b.seq({b.literal("n"), digit}), b.seq({b.literal("\""), b.repeat(not_quote, 0, -1), b.literal("\"")})}));
  EXPECT_TRUE(full_match(g, "n7"));
  EXPECT_FALSE(full_match(g, "nx"));
  EXPECT_TRUE(full_match(g, "\"hello \\ world\""));
  EXPECT_TRUE(full_match(g, "\"\""));
  EXPECT_FALSE(full_match(g, "\"a\"b\""));
  EXPECT_FALSE(full_match(g, "x"));
}

TEST(GrammarMatcher, BoundedAndUnboundedRepetition) {
  GrammarBuilder b;
  auto a = b.literal("a");
  auto g = b.build(b.seq({b.repeat(a, 2, 4), b.literal(";")}));
  EXPECT_FALSE(full_match(g, "a;"));
  EXPECT_TRUE(full_match(g, "aa;"));
  EXPECT_TRUE(full_match(g, "aaaa;"));
  EXPECT_FALSE(full_match(g, "aaaaa;"));
  auto star = b.build(b.repeat(b.literal("ab"), 0, -1));
  EXPECT_TRUE(full_match(star, ""));
  EXPECT_TRUE(full_match(star, "abababab"));
  EXPECT_FALSE(full_match(star, "aba"));
  auto exact = b.build(b.repeat(a, 3, 3));
  EXPECT_TRUE(full_match(exact, "aaa"));
  EXPECT_FALSE(full_match(exact, "aa"));
  EXPECT_THROW(b.repeat(a, 3, 2), dflash::Error);
  EXPECT_THROW(b.repeat(b.optional(a), 0, -1), dflash::Error);  // (a?)* would loop on nothing
  auto nested = b.build(b.repeat(b.optional(a), 0, 3));             // bounded: fine
  EXPECT_TRUE(full_match(nested, "aa"));
  EXPECT_FALSE(full_match(nested, "aaaa"));
}

TEST(GrammarMatcher, RecursiveRulesBalancedBrackets) {
  GrammarBuilder b;
  Expr group = b.declare("group");
  b.define(group, b.seq({b.literal("("), b.repeat(group, 0, -1), b.literal(")")}));
  auto g = b.build(group);
  EXPECT_TRUE(full_match(g, "()"));
  EXPECT_TRUE(full_match(g, "(()(()))"));
  EXPECT_FALSE(full_match(g, "(()"));
  EXPECT_TRUE(prefix_ok(g, "((((("));
  EXPECT_FALSE(prefix_ok(g, "())"));
}

TEST(GrammarMatcher, LoopsReturnToTheSameState) {
  // Right recursion is a tail call: after each "a" the state is the same, so masks cache.
  GrammarBuilder b;
  auto g = b.build(b.seq({b.literal("["), b.repeat(b.literal("a"), 0, -1), b.literal("]")}));
  GrammarMatcher m(g);
  m.accept_bytes("[a");
  GrammarMatcher n = m;
  n.accept_bytes("aaaa");
  EXPECT_EQ(m, n);
  EXPECT_EQ(m.hash(), n.hash());
  n.accept_byte(']');
  EXPECT_FALSE(m == n);
  EXPECT_TRUE(n.can_end());
}

TEST(GrammarMatcher, NondeterminismKeepsEveryParse) {
  GrammarBuilder b;
  auto g = b.build(b.alt({b.literal("abc"), b.literal("abd"), b.seq({b.literal("a"), b.repeat(b.literal("b"), 1, -1)})}));
  EXPECT_TRUE(full_match(g, "abc"));
  EXPECT_TRUE(full_match(g, "abd"));
  EXPECT_TRUE(full_match(g, "abbb"));
  EXPECT_TRUE(full_match(g, "ab"));
  EXPECT_FALSE(full_match(g, "abbc"));
}

TEST(GrammarMatcher, CopiesAreIndependent) {
  GrammarBuilder b;
  auto g = b.build(b.alt({b.literal("xy"), b.literal("xz")}));
  GrammarMatcher m(g);
  m.accept_byte('x');
  GrammarMatcher c = m;
  EXPECT_TRUE(c.accept_byte('y'));
  EXPECT_TRUE(c.can_end());
  EXPECT_FALSE(m.can_end());
  EXPECT_TRUE(m.accept_byte('z'));
}

TEST(GrammarMatcher, BuildErrors) {
  GrammarBuilder b;
  Expr undefined = b.declare("later");
  EXPECT_THROW(b.build(b.seq({b.literal("a"), undefined})), dflash::Error);
  Expr left = b.declare("left");
  b.define(left, b.alt({b.seq({left, b.literal("a")}), b.literal("b")}));
  try {
    b.build(left);
    FAIL() << "left recursion was accepted";
  } catch (const dflash::Error& e) {
    EXPECT_NE(std::string(e.what()).find("left"), std::string::npos) << e.what();
  }
  // Left recursion hidden behind a rule that can match nothing.
  Expr hidden = b.declare("hidden");
  b.define(hidden, b.alt({b.seq({b.optional(b.literal("x")), hidden, b.literal("a")}), b.literal("b")}));
  EXPECT_THROW(b.build(hidden), dflash::Error);
  EXPECT_THROW(b.define(left, b.literal("c")), dflash::Error);  // defined twice
}

TEST(GrammarMatcher, EmptyAlternationNeverMatches) {
  GrammarBuilder b;
  auto g = b.build(b.seq({b.literal("a"), b.alt({})}));
  GrammarMatcher m(g);
  EXPECT_FALSE(m.dead());  // "a" may still come
  EXPECT_FALSE(m.accept_byte('a'));
}

TEST(GrammarMatcher, BuilderIsReusableAndGrammarsShared) {
  GrammarBuilder b;
  auto word = b.literal("hi");
  auto g1 = b.build(word);
  auto g2 = b.build(b.repeat(word, 1, 2));
  EXPECT_TRUE(full_match(g1, "hi"));
  EXPECT_FALSE(full_match(g1, "hihi"));
  EXPECT_TRUE(full_match(g2, "hihi"));
  EXPECT_FALSE(g2->to_string().empty());
}

}  // namespace
