#pragma once
// A constraint on which token may come next: structured output (a JSON schema's grammar),
// forced tool calls, or a gate that leaves reasoning free. The sampler applies its mask to the
// target's logits at every position, in plain decoding and at every verified row of a
// speculative block, so constrained speculative output equals constrained plain output token
// for token; the speculative loop also masks the draft's proposals (a clone walks them), which
// only raises acceptance.
//
// Masks are bitsets over the vocabulary: bit t of word t / 64 set when token t is allowed.
#include <cstdint>
#include <memory>
#include <vector>

namespace dflash {

inline bool mask_allows(const uint64_t* bits, int32_t t) {
  return bits == nullptr || ((bits[size_t(t) >> 6] >> (unsigned(t) & 63)) & 1u) != 0;
}

class TokenConstraint {
 public:
  virtual ~TokenConstraint() = default;
  // The tokens allowed next, as a bitset of (vocab + 63) / 64 words; valid until the next
  // accept(). Never empty: where nothing else may follow, the end-of-sequence ids are allowed.
  virtual const uint64_t* allowed() = 0;
  // Moves past `token`; false (and no change) when the token is not allowed here. Forced
  // tokens (a think cap's "</think>") pass through here too.
  virtual bool accept(int32_t token) = 0;
  // An independent copy at the same position (the draft walks one over its proposals).
  // (What constraints cost is timed where they are called: Timings::mask_s.)
  virtual std::unique_ptr<TokenConstraint> clone() const = 0;
};

}  // namespace dflash
