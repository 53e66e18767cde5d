#pragma once
// Token selection. The random number for output token t is a pure function of (seed, t), so
// plain decoding and speculative decoding draw the same sample at the same position no
// matter how many passes it took to get there.
#include <cstdint>
#include <utility>
#include <vector>

namespace dflash {

struct SamplingParams {
  float temperature = 0.0f;  // 0: greedy
  int top_k = 0;             // 0: off
  float top_p = 1.0f;
  float min_p = 0.0f;
  float repetition_penalty = 1.0f;
  uint64_t seed = 0;
  // OpenAI's: logit[t] -= frequency_penalty * c[t] + presence_penalty * (c[t] > 0), c[t] the
  // count of t among the generated tokens (not the prompt).
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  // OpenAI's logit_bias: (token id, bias) added to the logits; ids outside the vocabulary
  // are ignored here (the server refuses them).
  std::vector<std::pair<int32_t, float>> logit_bias;
};

// Uniform in [0, 1) for (seed, index).
double counter_uniform(uint64_t seed, uint64_t index);

class Sampler {
 public:
  explicit Sampler(SamplingParams p) : p_(p) {}
  const SamplingParams& params() const { return p_; }
  bool greedy() const { return p_.temperature <= 0.0f; }
  // Whether the logits depend on the tokens before (repetition, presence, frequency penalty).
  bool needs_history() const {
    return p_.repetition_penalty != 1.0f || p_.presence_penalty != 0.0f || p_.frequency_penalty != 0.0f;
  }
  // Whether sample() is the argmax of the raw logits (greedy, nothing that changes them).
  bool plain_argmax() const { return greedy() && !needs_history() && p_.logit_bias.empty(); }

  // `history` (prompt and generated ids) feeds the penalties; `index` is the position of
  // this token among the generated ones, so history's last `index` entries are the generated
  // tokens (presence and frequency penalty count those only). `allowed` (a TokenConstraint's
  // bitset, token_constraint.h; null: every token) removes tokens before any other step, as
  // if their logits were -inf.
  //
  // Order: mask, logit_bias, repetition penalty (prompt and output, Hugging Face's),
  // frequency and presence penalty (output only); then greedy takes the argmax, sampling
  // applies temperature, top-k, top-p, min-p and draws.
  int32_t sample(const float* logits, int vocab, const std::vector<int32_t>& history, uint64_t index,
                 const uint64_t* allowed = nullptr) const;
  // The distribution sample() draws from, after every filter (zeros outside the kept set).
  void probabilities(const float* logits, int vocab, const std::vector<int32_t>& history, uint64_t index,
                     std::vector<float>& p, const uint64_t* allowed = nullptr) const;
  // The logits after the mask, logit_bias and the penalties (before temperature).
  void adjusted_logits(const float* logits, int vocab, const std::vector<int32_t>& history, uint64_t index,
                       std::vector<float>& l, const uint64_t* allowed = nullptr) const;

 private:
  SamplingParams p_;
};

int32_t argmax(const float* x, int n);  // lowest index on ties
// The argmax over the tokens `allowed` lets through (null: argmax); the lowest allowed index
// when every allowed value is NaN.
int32_t argmax_allowed(const float* x, int n, const uint64_t* allowed);

}  // namespace dflash
