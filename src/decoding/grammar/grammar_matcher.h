#pragma once
// A pushdown recognizer for a Grammar, one byte at a time. Nondeterminism (alternatives that
// share a prefix, a number that may go on or end) is kept as a set of parse stacks.
//
// A stack is a list of grammar positions, bottom first: the top is always a terminal (the byte
// class to match next), the ones below are where to resume when the rule above finishes.
// Returning into the end of a rule is never pushed (a tail call), so right recursion such as
// "x*" or a list of items does not grow the stack, and "a*" loops back to the same state.
// The empty stack means the root rule is complete.
//
// The state is canonical: the stacks are sorted and deduplicated and written into one flat
// vector of integers, so two matchers at the same position compare and hash equal. That
// vector is what mask caches key on.
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "decoding/grammar/grammar.h"

namespace dflash {

class GrammarMatcher {
 public:
  explicit GrammarMatcher(std::shared_ptr<const Grammar> grammar);

  // Moves past byte b. Returns false when b cannot follow: the matcher is then dead.
  bool accept_byte(uint8_t b);
  // All of `bytes`, or false (and dead) as soon as one cannot follow.
  bool accept_bytes(std::string_view bytes);
  bool can_end() const;  // the root rule is complete here (more bytes may still be allowed)
  bool dead() const { return state_.empty(); }

  // The canonical state: for each stack, its length then its positions; stacks sorted.
  const std::vector<uint32_t>& state() const { return state_; }
  size_t hash() const { return hash_state(state_.data(), state_.size()); }
  bool operator==(const GrammarMatcher& o) const { return grammar_ == o.grammar_ && state_ == o.state_; }
  const Grammar& grammar() const { return *grammar_; }
  const std::shared_ptr<const Grammar>& grammar_ptr() const { return grammar_; }

  // The state after byte b from canonical state `in` (empty: dead). The building block of
  // accept_byte, exposed for the token-mask walk, which steps states it has interned.
  static void step(const Grammar& g, const uint32_t* in, size_t n, uint8_t b, std::vector<uint32_t>& out);
  static bool state_can_end(const uint32_t* s, size_t n);
  static size_t hash_state(const uint32_t* s, size_t n);
  // The bytes allowed next from a state, as a set (the union of the stacks' top classes).
  static ByteSet next_bytes(const Grammar& g, const uint32_t* s, size_t n);

 private:
  std::shared_ptr<const Grammar> grammar_;
  std::vector<uint32_t> state_;
};

}  // namespace dflash
