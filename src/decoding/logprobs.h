#pragma once
// Log-probabilities of emitted tokens for the API's `logprobs` / `top_logprobs`: the
// log-softmax of the target's raw logits at the position (before repetition penalty,
// temperature, top-k/top-p/min-p), what vLLM reports by default. Computed in double in one
// fixed order, so equal logit rows give bit-equal results; with batch-invariant kernels a
// position's logits are the same in decode and in a verify block, so the numbers do not
// depend on whether a draft was used.
#include <cstdint>
#include <vector>

namespace dflash {

struct TokenProb {
  int32_t id = 0;
  double logprob = 0;  // -inf where the logit is -inf
};

struct TokenLogprobs {
  TokenProb chosen;
  std::vector<TokenProb> top;  // by logprob descending, ties by id ascending
};

constexpr int kMaxTopLogprobs = 20;  // OpenAI's limit for chat's top_logprobs

// log(sum(exp(logits))) over the row: max first, then sum of exp(x - max) in index order,
// all in double.
double log_sum_exp(const float* logits, int vocab);

// The chosen token's logprob and the `top_n` (0..kMaxTopLogprobs, clamped to the vocabulary)
// most likely tokens. One pass over the row for the sum and one for the selection; the
// chosen token is reported whether or not it is in the top list.
TokenLogprobs token_logprobs(const float* logits, int vocab, int32_t chosen, int top_n);

}  // namespace dflash
