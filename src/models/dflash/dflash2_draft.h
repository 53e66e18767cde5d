#pragma once
// A DFlash2 draft (DFlash2DraftModel): the DFlash draft plus two cheap additions, short
// per-channel convolutions over the block around each sublayer, and a candidate selector that
// picks each block token among the top-k of the draft's logits with a learned bigram-like
// edge score to the token chosen before it. Layout and math: shared/dflash-format.md.
#include <memory>
#include <string>
#include <vector>

#include "models/dflash/dflash_draft.h"

namespace dflash {

struct DFlash2Config {
  int conv_kernel = 2;      // taps: the row itself and the K-1 rows before it in the block
  int conv_group = 16;      // channels sharing one dynamic tap
  int selector_rank = 256;
  int selector_top_k = 16;
  float output_multiplier = 1.0f;
  float softcap = 0.0f;     // final_logit_softcapping; 0: none
};

class DFlash2Draft : public DFlashDraft {
 public:
  // `config`: the folder's config.json, already read (architectures: DFlash2DraftModel).
  static std::unique_ptr<DFlash2Draft> load(const std::string& dir, const nlohmann::json& config,
                                            const LoadOptions& opt, const TargetModel& target);
  const char* kind() const override { return "dflash2"; }
  const DFlash2Config& config2() const { return cfg2_; }

  // Logits after output_multiplier and softcapping, the vector the selector starts from.
  void propose(SequenceState& state, int32_t first, int B, float* logits) const override;
  bool proposes_tokens() const override { return true; }
  void draft_batch(const std::vector<DraftJob*>& jobs) const override;
  void propose_tokens(SequenceState& state, int32_t first, int B, float temperature, const double* uniforms,
                      DraftTokens& out) const override;

  // One block with everything exposed (tests, the draft-logits command): normed final hidden
  // states [B-1][hidden], logits [B-1][vocab], and the selector's walk.
  void draft_block(SequenceState& state, int32_t first, int B, float temperature, const double* uniforms,
                   float* normed, float* logits, DraftTokens& out) const;
  // The selector alone: rows = B-1 proposals after `anchor`.
  void select(int32_t anchor, const float* normed, const float* logits, int rows, float temperature,
              const double* uniforms, DraftTokens& out) const;

  // Where a block's time goes (accumulated until reset; single-flight like the forward).
  struct Timing {
    double conv_s = 0, selector_s = 0, total_s = 0;
    long blocks = 0;
  };
  const Timing& timing() const { return timing_; }
  void reset_timing() const { timing_ = Timing{}; }

 private:
  void sublayer_in(int l, int sub, float* h, const std::vector<Segment>& blocks) const override;
  void sublayer_out(int l, int sub, float* o, const std::vector<Segment>& blocks) const override;
  // Each block convolved on its own: a row's taps never reach into another sequence's block.
  void conv(int l, int sub, int side, float* x, const std::vector<Segment>& blocks) const;
  void finish_logits(float* logits, size_t n) const;

  struct Conv {
    std::vector<float> base;  // [2 sides][K taps][hidden]
    WeightMatrix projection;  // [2*K*G][hidden]: rows (side*K + tap)*G + g
  };
  DFlash2Config cfg2_;
  std::vector<Conv> convs_;  // [layer*2 + sub]
  WeightMatrix hidden_projection_;       // [rank][hidden]
  WeightMatrix predecessor_, successor_;  // [vocab][rank], kept memory-mapped
  mutable Timing timing_;
  // The sublayer's dynamic taps (sublayer_in to sublayer_out), the convolution's input copy
  // and the selector's work, grown to the largest block and reused.
  struct SelectorBuffers {
    ActivationBuffer dyn, conv_in, hp, succ, pred, edge, cand;
    std::vector<double> score, prob;
  };
  mutable SelectorBuffers bufs_;
};

}  // namespace dflash
