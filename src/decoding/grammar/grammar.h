#pragma once
// A byte-level context-free grammar: what structured output (a JSON schema) and forced tool
// calls compile to. Built with GrammarBuilder from handles (literals, byte classes, sequence,
// alternation, repetition, named rules that may recurse), then frozen by build() into an
// immutable Grammar that any number of matchers on any number of threads share.
//
// The frozen form is a flat array of symbols: every alternative of every rule is a run of
// terminals (byte classes) and rule references closed by an END marker. A matcher position is
// an index into that array, so a parse stack is a short vector of integers (grammar_matcher.h).
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace dflash {

// A set of bytes: 256 bits.
struct ByteSet {
  std::array<uint64_t, 4> bits{};
  bool has(uint8_t b) const { return (bits[b >> 6] >> (b & 63)) & 1u; }
  ByteSet& add(uint8_t b) { bits[b >> 6] |= uint64_t(1) << (b & 63); return *this; }
  ByteSet& add_range(uint8_t lo, uint8_t hi) {
    for (unsigned b = lo; b <= hi; ++b) add(uint8_t(b));
    return *this;
  }
  ByteSet& add_chars(std::string_view chars) {
    for (char c : chars) add(uint8_t(c));
    return *this;
  }
  ByteSet negated() const {
    ByteSet r;
    for (int i = 0; i < 4; ++i) r.bits[i] = ~bits[i];
    return r;
  }
  bool empty() const { return (bits[0] | bits[1] | bits[2] | bits[3]) == 0; }
  bool operator==(const ByteSet& o) const { return bits == o.bits; }
};

// The frozen grammar. Symbols are packed in one uint32: the top two bits say the kind.
class Grammar {
 public:
  enum Kind : uint32_t { kEnd = 0, kTerminal = 1u << 30, kRule = 2u << 30 };
  static constexpr uint32_t kKindMask = 3u << 30;
  static constexpr uint32_t kArgMask = ~kKindMask;

  uint32_t symbol(uint32_t pos) const { return symbols_[pos]; }
  static Kind kind(uint32_t sym) { return Kind(sym & kKindMask); }
  static uint32_t arg(uint32_t sym) { return sym & kArgMask; }
  const ByteSet& byte_class(uint32_t id) const { return classes_[id]; }
  // Where each alternative of `rule` starts in the symbol array.
  const std::vector<uint32_t>& alternatives(uint32_t rule) const { return rules_[rule].alts; }
  const std::string& rule_name(uint32_t rule) const { return rules_[rule].name; }
  uint32_t root() const { return root_; }
  size_t rule_count() const { return rules_.size(); }
  size_t symbol_count() const { return symbols_.size(); }
  // A readable dump (GBNF-like), for tests and for debugging a schema's grammar.
  std::string to_string() const;

 private:
  friend class GrammarBuilder;
  struct Rule {
    std::string name;
    std::vector<uint32_t> alts;
  };
  std::vector<uint32_t> symbols_;
  std::vector<ByteSet> classes_;
  std::vector<Rule> rules_;
  uint32_t root_ = 0;
};

// Builds grammars from handles. Handles belong to the builder that made them. Sub-expressions
// may be shared freely (a JSON grammar uses one whitespace handle in every gap): a handle
// used in several places becomes one rule.
class GrammarBuilder {
 public:
  struct Expr {
    uint32_t id = UINT32_MAX;
    bool valid() const { return id != UINT32_MAX; }
  };

  GrammarBuilder();
  ~GrammarBuilder();
  GrammarBuilder(const GrammarBuilder&) = delete;
  GrammarBuilder& operator=(const GrammarBuilder&) = delete;

  Expr empty();                              // matches the empty string
  Expr literal(std::string_view bytes);      // exactly these bytes
  Expr byte_class(const ByteSet& set);       // one byte of the set (an empty set never matches)
  Expr byte_range(uint8_t lo, uint8_t hi);   // one byte in [lo, hi]
  Expr seq(const std::vector<Expr>& parts);  // one after the other
  Expr alt(const std::vector<Expr>& options);  // any one of them (none: never matches)
  // `min` to `max` copies of x one after the other; max = -1: no upper bound (then x must not
  // match the empty string: dflash::Error otherwise).
  Expr repeat(Expr x, int min, int max);
  Expr optional(Expr x) { return repeat(x, 0, 1); }

  // A named rule usable before it has a body, so rules can refer to themselves or each
  // other (a JSON schema's recursive $ref). Every declared rule needs define() before build().
  Expr declare(const std::string& name);
  void define(Expr rule, Expr body);

  // Freezes the grammar that starts at `root`. Throws dflash::Error for a declared rule with
  // no body, for left recursion (a rule that can reach itself without consuming a byte, which
  // a top-down matcher would expand forever) and for a grammar too large to match quickly.
  // The builder may be used again afterwards; earlier handles stay valid.
  std::shared_ptr<const Grammar> build(Expr root) const;

 private:
  struct Node;
  class Lowering;
  Expr add(Node node);
  const Node& node(Expr e) const;
  bool nullable(uint32_t id, int depth) const;
  std::vector<Node> nodes_;
};

}  // namespace dflash
