#pragma once
// The pieces dflash graft's targets (dense Qwen3: graft_pair.cpp; Qwen3.5 hybrid: graft_qwen35.cpp)
// and their drafts (graft_draft.cpp) share: the small model's sizes, the layer grower, the
// padding constant, config rewriting. Internal to models/graft.
#include <deque>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "models/graft/graft.h"
#include "models/graft/graft_grow.h"

namespace dflash::graft_detail {

namespace fs = std::filesystem;

void need(bool ok, const std::string& what);  // throws Error("graft: " + what)
std::string arch_of(const nlohmann::ordered_json& j);

// The sizes of a small decoder (a dense config, or a hybrid's text_config).
struct SmallDims {
  int H, L, nH, nKV, hd, F, V;
  double eps;
  bool tied;
};
SmallDims read_dims(const nlohmann::ordered_json& j, const std::string& origin);

// Everything the rules need from both sides fits (GrowMaps' nesting of heads and groups).
GrowMaps maps_for(const SmallDims& s, const GraftShape& b, const char* who);

// The shape a grown draft has: the target's hidden size and vocabulary, the draft's own
// attention and MLP sizes (GraftShape::draft_*; 0: the target's).
GraftShape draft_shape(const GraftShape& b);

// Decoder-layer tensors of one layer of the big model (`live`: it is one of the small model's
// layers, which keep their index; else an extra one that reads nothing from live channels and
// writes nothing into them).
struct LayerGrower {
  const TensorStore& store;
  std::deque<SmallTensor>& keep;
  const GrowMaps& m;
  uint64_t seed;
  DType dtype;
  float norm_scale;            // sqrt(H_small / H_big)
  bool zero_centered = false;  // Qwen3.5: RMSNorm weights hold w of (1 + w)
  bool gated_q = false;        // Qwen3.5: q_proj rows are per head [query hd | gate hd]

  const SmallTensor* get(const std::string& name);
  // A norm weight stored so that the multiplier is `mult` (w itself, or mult - 1 when zero-centred).
  static float stored(bool zc, double mult) { return float(zc ? mult - 1.0 : mult); }
  float stored(double mult) const { return stored(zero_centered, mult); }
  // The multiplier a small norm weight stands for.
  static double multiplier(bool zc, float w) { return zc ? 1.0 + double(w) : double(w); }
  // An RMSNorm over the hidden size: live multipliers scaled so that the normalised live
  // values are unchanged (mean square over H_big is H_small/H_big of the small one; eps too).
  GrownTensor hidden_norm(const std::string& big, const std::string* small);
  void attention(std::vector<GrownTensor>& out, const std::string& big, const std::string& small, bool live);
  void mlp(std::vector<GrownTensor>& out, const std::string& big, const std::string& small, bool live);
  // input_layernorm, attention, post_attention_layernorm, mlp: a dense decoder layer.
  void layer(std::vector<GrownTensor>& out, const std::string& big, const std::string& small, bool live);
  // A matrix of this layer: trained values from `small + n` when live.
  void mat(std::vector<GrownTensor>& out, const std::string& big, const std::string& small, const char* n, bool live,
           std::vector<int64_t> shape, const std::function<int(int64_t)>& rows, const std::function<int(int64_t)>& cols);
};

// The LM head's live rows plus one more, the mean of the live rows, which every padding row
// gets on the live channels (a padding logit's live part is the mean of the live logits).
SmallTensor with_mean_row(const SmallTensor& head);

// Padding ids (the big vocabulary past the small one) must never win, also at temperature > 0.
// Two dead channels c0 = Hs, c1 = Hs+1 of the residual stream carry a constant K; the final
// norm weights them +W and -W; live head rows cancel them, padding rows take -2 M n0 (about
// -1e4). The constant adds 2K^2 to every hidden RMSNorm's sum of squares, which rms_norm_eps
// absorbs: eps_big = (H_small eps_small - 2K^2) / H_big. Full reasoning: graft_pair.cpp.
struct Padding {
  float K = 0, W = 0, M = 1024;
  // K a power of two with 2K^2 at most half of H_small eps (exact in bf16).
  static Padding make(int Hs, double eps, double r);
  // K such that eps_big comes out as `eps_big_wanted` (a hybrid's gated norm needs one value),
  // rounded to bf16; throws when no positive K does it.
  static Padding for_eps(int Hs, int Hb, double eps, double eps_big_wanted, double r);
  double eps_big(int Hs, int Hb, double eps_small) const { return (Hs * eps_small - 2.0 * double(K) * K) / Hb; }
};

// The small embedding grown: live tokens' live channels trained, the constant channels K (live)
// or -M/+M (padding), padding rows the live rows' mean on the live channels.
GrownTensor grown_embedding(const std::string& name, const SmallTensor& emb_with_mean, const GraftShape& b,
                            const GrowMaps& m, const Padding& pad, int small_vocab, uint64_t seed, DType dtype);
// An untied LM head grown likewise (constant channels 0/0 live, -M/+M padding).
GrownTensor grown_head(const std::string& name, const SmallTensor& head_with_mean, const GraftShape& b,
                       const GrowMaps& m, const Padding& pad, int small_vocab, uint64_t seed, DType dtype);
// A final norm: live multipliers rescaled, +W and -W on the constant channels.
GrownTensor grown_final_norm(LayerGrower& g, const std::string& big, const std::string& small, const Padding& pad);

void copy_if_present(const fs::path& from_dir, const fs::path& to_dir, const char* name);
void write_json(const fs::path& p, const nlohmann::ordered_json& j);
const char* torch_dtype(DType t);
// A small config (a dense one, or a hybrid's text_config) rewritten for the shape: sizes,
// `layers` layers, eps, the dtype under `dtype_key`; layer_types grow with the layers, extra
// layers repeating the last kind.
nlohmann::ordered_json grown_config(nlohmann::ordered_json j, const GraftShape& b, int layers, double eps, DType dtype,
                                    const char* dtype_key = "torch_dtype");

// The draft of a grown pair: writes out/draft (see graft_draft.cpp).
void grow_draft(const GraftOptions& o, const nlohmann::ordered_json& dcfg, const SmallDims& ts, const Padding& pad,
                double r);
// The Qwen3.5 hybrid target: writes out/target; returns the Padding its norms need.
Padding grow_qwen35_target(const GraftOptions& o, const nlohmann::ordered_json& tcfg, const SmallDims& ts,
                           double draft_eps);

}  // namespace dflash::graft_detail
