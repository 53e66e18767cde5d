#pragma once
// Token selection. The random number for output token t is a pure function of (seed, t), so
// plain decoding and speculative decoding draw the same sample at the same position no
// matter how many passes it took to get there.
#include <cstdint>
#include <vector>

namespace dflash {

struct SamplingParams {
  float temperature = 0.0f;  // 0: greedy
  int top_k = 0;             // 0: off
  float top_p = 1.0f;
  float min_p = 0.0f;
  float repetition_penalty = 1.0f;
  uint64_t seed = 0;
};

// Uniform in [0, 1) for (seed, index).
double counter_uniform(uint64_t seed, uint64_t index);

class Sampler {
 public:
  explicit Sampler(SamplingParams p) : p_(p) {}
  const SamplingParams& params() const { return p_; }
  bool greedy() const { return p_.temperature <= 0.0f; }

  // `history` (prompt and generated ids) feeds the repetition penalty; `index` is the
  // position of this token among the generated ones. `allowed` (a TokenConstraint's bitset,
  // token_constraint.h; null: every token) removes tokens before any other step, as if
  // their logits were -inf.
  int32_t sample(const float* logits, int vocab, const std::vector<int32_t>& history, uint64_t index,
                 const uint64_t* allowed = nullptr) const;
  // The distribution sample() draws from, after every filter (zeros outside the kept set).
  void probabilities(const float* logits, int vocab, const std::vector<int32_t>& history, std::vector<float>& p,
                     const uint64_t* allowed = nullptr) const;

 private:
  SamplingParams p_;
};

int32_t argmax(const float* x, int n);  // lowest index on ties
// The argmax over the tokens `allowed` lets through (null: argmax); the lowest allowed index
// when every allowed value is NaN.
int32_t argmax_allowed(const float* x, int n, const uint64_t* allowed);

}  // namespace dflash
