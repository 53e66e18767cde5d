// dflash graft: the DFlash / DFlash2 draft grown beside its target (docs/graft.md). The draft
// is a dense Qwen3-style decoder whatever the target's family; it reads the target's tapped
// layers, which keep their indices, and carries the target's padding constant.
#include <cmath>

#include "models/dflash/dflash_draft.h"
#include "models/graft/graft_parts.h"
#include "util/error.h"

namespace dflash::graft_detail {

void grow_draft(const GraftOptions& o, const nlohmann::ordered_json& dcfg, const SmallDims& ts, const Padding& pad,
                double r) {
  const fs::path ddir(o.draft), out(o.out);
  const std::string dcfg_path = (ddir / "config.json").string();
  const std::string darch = arch_of(dcfg);
  const SmallDims ds = read_dims(dcfg, dcfg_path);
  const GraftShape b = draft_shape(o.shape);
  need(b.draft_layers >= ds.L, "the small draft has more layers than the grown draft");
  need(ds.H == ts.H, "the draft's hidden size differs from its target's");
  need(!dcfg.contains("rope_scaling") || dcfg["rope_scaling"].is_null(), "draft rope scaling is not supported");
  // The draft's residual must carry the same constant as the target's (see Padding).
  need(!dcfg.contains("input_embedding_scale") || !dcfg["input_embedding_scale"].is_number() ||
           dcfg["input_embedding_scale"].get<double>() == 1.0,
       "a draft with input_embedding_scale != 1 is not supported");
  const GrowMaps dm = maps_for(ds, b, "the small draft's");
  const double eps_big = pad.eps_big(ds.H, b.hidden, ds.eps);
  need(eps_big > 0, "the draft's rms_norm_eps is too small for the target's padding constant");
  const int Hs = ts.H, c0 = Hs, c1 = Hs + 1;
  std::deque<SmallTensor> keep;

  const bool v2 = darch == "DFlash2DraftModel";
  auto key = [](const nlohmann::ordered_json& j, const char* k) -> const nlohmann::ordered_json* {
    if (j.contains("dflash_config") && j["dflash_config"].is_object() && j["dflash_config"].contains(k))
      return &j["dflash_config"][k];
    return j.contains(k) ? &j[k] : nullptr;
  };
  // The taps: the small target's layers keep their indices, so the ids stay; written out
  // explicitly since the default formula would give other ids for the big depths.
  std::vector<int> taps;
  if (auto* t = key(dcfg, "target_layer_ids"); t && !t->is_null()) {
    for (auto& v : *t) taps.push_back(v.get<int>());
  } else {
    taps = default_target_layer_ids(dcfg.value("num_target_layers", ts.L), ds.L);
  }
  for (int t : taps) need(t >= 0 && t < ts.L, "the draft taps a layer the small target does not have");
  if (v2) need(key(dcfg, "conv_kernel_size") && key(dcfg, "conv_group_size"), dcfg_path + ": missing conv_kernel_size/conv_group_size");
  const int K = v2 ? key(dcfg, "conv_kernel_size")->get<int>() : 0;
  const int gs = v2 ? key(dcfg, "conv_group_size")->get<int>() : 1;
  if (v2) need(ts.H % gs == 0 && b.hidden % gs == 0, "conv_group_size must divide both hidden sizes");
  fs::create_directories(out / "draft");
  {
    const TensorStore store = TensorStore::open_folder(ddir.string());
    const std::string p = store.find("fc.weight") ? "" : "model.";
    LayerGrower g{store, keep, dm, o.seed + 1, o.dtype, float(std::sqrt(r))};
    std::vector<GrownTensor> ds_out;
    const int Hb = b.hidden;
    // fc reads each tap's live channels; its rows c0, c1 copy the first tap's constant, so the
    // context rows carry K there too and the draft's hidden_norm sees what its eps expects.
    ds_out.push_back(patched(grow_matrix("fc.weight", {b.hidden, int64_t(taps.size()) * b.hidden},
                                         g.get(p + "fc.weight"), [&dm](int64_t r) { return dm.hid(int(r)); },
                                         [Hs, Hb](int64_t c) {
                                           const int cc = int(c % Hb);
                                           return cc < Hs ? int(c / Hb * Hs + cc) : cc < Hs + kConstChannels ? kZeroCol : kDead;
                                         },
                                         g.seed, o.dtype),
                             [c0, c1](int64_t r, float* out) {
                               if (r == c0) out[c0] = 1.0f;
                               if (r == c1) out[c1] = 1.0f;
                             }));
    const std::string hn = p + "hidden_norm.weight", nn = p + "norm.weight";
    ds_out.push_back(g.hidden_norm("hidden_norm.weight", &hn));
    for (int l = 0; l < b.draft_layers; ++l) {
      const std::string big = "layers." + std::to_string(l) + ".", small = p + big;
      const bool live = l < ds.L;
      g.layer(ds_out, big, small, live);
      if (!v2) continue;
      // DFlash2 convolutions: per-channel base taps [2, K, H] and the dynamic-tap projection
      // [2*K*G, H] whose row (side*K + tap)*G + g serves channel group g; live groups are the
      // small model's (its channels are the first ones).
      const int Gs = Hs / gs, Gb = Hb / gs;
      for (const char* conv : {"attention_conv.", "mlp_conv."}) {
        const std::string base = std::string(conv) + "base_kernel", proj = std::string(conv) + "kernel_projection.weight";
        auto base_rows = [live](int64_t r) { return live ? int(r) : kDead; };
        auto base_cols = [&dm, live](int64_t c) { return live ? dm.hid(int(c)) : kDead; };
        ds_out.push_back(grow_matrix(big + base, {2, K, Hb}, live ? g.get(small + base) : nullptr, base_rows, base_cols,
                                     g.seed, o.dtype));
        auto proj_rows = [live, Gs, Gb](int64_t r) {
          const int st = int(r / Gb), grp = int(r % Gb);
          return live && grp < Gs ? st * Gs + grp : kDead;
        };
        auto proj_cols = [&dm, live](int64_t c) {
          const int h = dm.hid(int(c));
          return h >= 0 ? (live ? h : kZeroCol) : h;
        };
        ds_out.push_back(grow_matrix(big + proj, {int64_t(2) * K * Gb, Hb}, live ? g.get(small + proj) : nullptr,
                                     proj_rows, proj_cols, g.seed, o.dtype));
      }
    }
    // The padding push is -2 M K W / rms of the residual: a trained draft's residual runs larger
    // than its target's (the hybrid demo draft's to a few hundred, where the push at the
    // target's W left padding only ~400 below the live maximum), so its final norm weights the
    // constant channels 16 times more; live rows still cancel them exactly.
    Padding draft_pad = pad;
    draft_pad.W *= 16;
    ds_out.push_back(grown_final_norm(g, "norm.weight", nn, draft_pad));
    if (v2) {
      // The selector keeps its rank; it reads the live channels of the normed hidden state.
      const SmallTensor* hp = g.get(p + "candidate_selector.hidden_projection.weight");
      const int R = int(hp->rows);
      ds_out.push_back(grow_matrix("candidate_selector.hidden_projection.weight", {R, Hb}, hp,
                                   [](int64_t r) { return int(r); }, [&dm](int64_t c) { return dm.hid(int(c)); },
                                   g.seed, o.dtype));
      // Codebooks: padding tokens never become candidates (their logits sit far below), so
      // their rows are zero.
      const int Vs = ts.V;
      for (const char* cb : {"candidate_selector.predecessor_codebook", "candidate_selector.successor_codebook"})
        ds_out.push_back(grow_matrix(cb, {b.vocab, R}, g.get(p + cb), [Vs](int64_t v) { return v < Vs ? int(v) : kDead; },
                                     [](int64_t c) { return int(c); }, g.seed, o.dtype));
    }
    write_grown((out / "draft" / "model.safetensors").string(), ds_out);
  }
  nlohmann::ordered_json dj = grown_config(dcfg, b, b.draft_layers, eps_big, o.dtype);
  dj["num_target_layers"] = o.shape.n_layers;
  if (dj.contains("target_layer_ids")) dj["target_layer_ids"] = taps;
  else {
    if (!dj.contains("dflash_config") || !dj["dflash_config"].is_object()) dj["dflash_config"] = nlohmann::ordered_json::object();
    dj["dflash_config"]["target_layer_ids"] = taps;
  }
  write_json(out / "draft" / "config.json", dj);
}

}  // namespace dflash::graft_detail
