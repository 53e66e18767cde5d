// dflash graft for a Qwen3.5 hybrid target (docs/graft.md, "Qwen3.5 hybrids"): the dense rules
// for embedding, norms, MLPs and the (gated) full-attention layers, plus the Gated DeltaNet
// layers', below. The layer kinds keep their places: the small model's layers are the first
// ones of the big pattern (full attention where (l + 1) % 4 == 0).
#include <cmath>

#include "models/graft/graft_parts.h"
#include "util/error.h"

namespace dflash::graft_detail {

namespace {

// Index maps of a Gated DeltaNet layer. Value head j reads key head j / r (r value heads per
// key head, Hugging Face's repeat_interleave order). A small value head keeps its slot in its
// group when the big groups are at least as wide (r_big >= r_small); when they are narrower
// (r_small a multiple of r_big) the value heads keep their index and several big key heads
// carry copies of one small key head. Dims: the small ones first, the rest dead.
//
// A dead value head reads q = k = v = 0, so its state stays zero, its readout is zero and its
// gated norm output is zero: out_proj's columns there are dead (random weights, zero input).
// The one number that changes is the readout's scale dk^-1/2 (taken over the big key dim): a
// live head's readout is sqrt(dk_small/dk_big) of the small one. The gated RMSNorm after it
// removes any scale but its eps: with its weight times sqrt(dv_small/dv_big) (dead dims zero)
// the normalised values are exact when the big eps is eps (dk_s/dk_b) (dv_s/dv_b), which
// the padding constant is chosen to give (Padding::for_eps).
struct LinearMaps {
  int nKs, nKb, nVs, nVb, dks, dkb, dvs, dvb;
  int rs() const { return nVs / nKs; }
  int rb() const { return nVb / nKb; }
  int small_v_head(int j) const {
    if (rb() >= rs()) {
      const int kb = j / rb(), slot = j % rb();
      return kb < nKs && slot < rs() ? kb * rs() + slot : -1;
    }
    return j < nVs ? j : -1;
  }
  int small_k_head(int kb) const {
    if (rb() >= rs()) return kb < nKs ? kb : -1;
    return kb * rb() < nVs ? kb * rb() / rs() : -1;
  }
  // in_proj_qkv's rows (and conv1d's channels): q | k | v.
  int qkv_row(int64_t i) const {
    const int64_t qk_b = int64_t(nKb) * dkb;
    if (i < 2 * qk_b) {
      const int part = int(i / qk_b), kb = int(i % qk_b / dkb), d = int(i % dkb), sk = small_k_head(kb);
      return sk >= 0 && d < dks ? part * nKs * dks + sk * dks + d : kDead;
    }
    const int v = head_dim_row(i - 2 * qk_b, kDead);
    return v >= 0 ? 2 * nKs * dks + v : kDead;
  }
  // A row of [value head][dv] (in_proj_z's rows, out_proj's columns): the small index or `dead`.
  int head_dim_row(int64_t i, int dead) const {
    const int j = int(i / dvb), d = int(i % dvb), sv = small_v_head(j);
    return sv >= 0 && d < dvs ? sv * dvs + d : dead;
  }
};

double partial_rotary(const nlohmann::ordered_json& text) {
  if (text.contains("rope_parameters") && text["rope_parameters"].is_object() &&
      text["rope_parameters"].contains("partial_rotary_factor"))
    return text["rope_parameters"]["partial_rotary_factor"].get<double>();
  return text.value("partial_rotary_factor", 0.25);
}

bool is_full_attention(const nlohmann::ordered_json& text, int l) {
  if (text.contains("layer_types") && text["layer_types"].is_array() && l < int(text["layer_types"].size()))
    return text["layer_types"][size_t(l)] == "full_attention";
  return (l + 1) % text.value("full_attention_interval", 4) == 0;
}

void linear_layer(LayerGrower& g, std::vector<GrownTensor>& out, const LinearMaps& lm, int conv, const std::string& big,
                  const std::string& small, bool live) {
  const GrowMaps& M = g.m;
  const std::string a = "linear_attn.";
  const int64_t C = 2 * int64_t(lm.nKb) * lm.dkb + int64_t(lm.nVb) * lm.dvb, Z = int64_t(lm.nVb) * lm.dvb;
  auto hid = [&M](int64_t c) { return M.hid(int(c)); };
  auto no_read = [&M](int64_t c) { return M.hid(int(c)) != kDead ? kZeroCol : kDead; };
  auto no_write = [&M](int64_t r) { return M.hid(int(r)) >= 0 ? kZeroRow : kDead; };
  auto dead = [](int64_t) { return kDead; };
  auto ident = [](int64_t c) { return int(c); };
  const auto& cols = live ? std::function<int(int64_t)>(hid) : std::function<int(int64_t)>(no_read);
  auto when_live = [live](std::function<int(int64_t)> f) { return live ? f : std::function<int(int64_t)>([](int64_t) { return kDead; }); };
  g.mat(out, big, small, "linear_attn.in_proj_qkv.weight", live, {C, M.Hb}, when_live([&lm](int64_t r) { return lm.qkv_row(r); }), cols);
  g.mat(out, big, small, "linear_attn.in_proj_z.weight", live, {Z, M.Hb},
        when_live([&lm](int64_t r) { return lm.head_dim_row(r, kDead); }), cols);
  auto head = when_live([&lm](int64_t j) { const int s = lm.small_v_head(int(j)); return s >= 0 ? s : kDead; });
  g.mat(out, big, small, "linear_attn.in_proj_b.weight", live, {lm.nVb, M.Hb}, head, cols);
  g.mat(out, big, small, "linear_attn.in_proj_a.weight", live, {lm.nVb, M.Hb}, head, cols);
  // Depthwise conv, [channels, 1, kernel]: a live channel's kernel as trained, a dead one's
  // zero (its input is zero either way).
  g.mat(out, big, small, "linear_attn.conv1d.weight", live, {C, 1, conv}, when_live([&lm](int64_t r) { return lm.qkv_row(r); }),
        ident);
  for (const char* n : {"A_log", "dt_bias"}) {
    const SmallTensor* s = live ? g.get(small + a + n) : nullptr;
    out.push_back(grow_vector(big + a + n, lm.nVb, [s, &lm](int64_t j) {
      const int sv = lm.small_v_head(int(j));
      return s && sv >= 0 ? s->v[size_t(sv)] : 0.0f;
    }));
  }
  const SmallTensor* nw = live ? g.get(small + a + "norm.weight") : nullptr;
  const double ns = std::sqrt(double(lm.dvs) / double(lm.dvb));
  const int dvs = lm.dvs;
  out.push_back(grow_vector(big + a + "norm.weight", lm.dvb, [nw, ns, dvs](int64_t d) {
    return nw && d < dvs ? float(double(nw->v[size_t(d)]) * ns) : 1.0f;  // plain weight, not 1 + w
  }));
  if (live)
    g.mat(out, big, small, "linear_attn.out_proj.weight", true, {M.Hb, Z}, hid,
          [&lm](int64_t c) { return lm.head_dim_row(c, kDead); });
  else
    g.mat(out, big, small, "linear_attn.out_proj.weight", false, {M.Hb, Z}, no_write, dead);
}

}  // namespace

Padding grow_qwen35_target(const GraftOptions& o, const nlohmann::ordered_json& tcfg, const SmallDims& ts,
                           double draft_eps) {
  const GraftShape& b = o.shape;
  const fs::path tdir(o.model), out(o.out);
  const bool nested = tcfg.contains("text_config") && tcfg["text_config"].is_object();
  const nlohmann::ordered_json& text = nested ? tcfg["text_config"] : tcfg;
  auto ti = [&](const char* k) {
    need(text.contains(k) && text[k].is_number_integer() && text[k].get<int>() > 0, std::string("the small target lacks ") + k);
    return text[k].get<int>();
  };
  const LinearMaps lm{ti("linear_num_key_heads"), b.linear_key_heads, ti("linear_num_value_heads"), b.linear_value_heads,
                      ti("linear_key_head_dim"), b.linear_key_dim, ti("linear_value_head_dim"), b.linear_value_dim};
  const int conv = text.value("linear_conv_kernel_dim", 4);
  need(conv == b.linear_conv, "the linear layers' conv kernel differs from the shape's");
  need(lm.nVs % lm.nKs == 0 && lm.nVb % lm.nKb == 0 && lm.nKb >= lm.nKs && lm.nVb >= lm.nVs &&
           (lm.rb() >= lm.rs() || lm.rs() % lm.rb() == 0),
       "the small linear layers' key/value heads do not nest in the shape's");
  need(lm.dkb >= lm.dks && lm.dvb >= lm.dvs, "the small linear layers' head dims exceed the shape's");
  const int rds = int(ts.hd * partial_rotary(text));
  need(rds > 0 && int64_t(b.rope_dims) * ts.hd == int64_t(rds) * b.head_dim,
       "the rotated share of a head differs between the small target and the shape");
  for (int l = 0; l < ts.L; ++l)
    need(is_full_attention(text, l) == ((l + 1) % 4 == 0), "the small target's layer " + std::to_string(l) +
                                                               " is not of the kind the shape has there");
  const GrowMaps tm = maps_for(ts, b, "the small target's");
  const double r = double(ts.H) / double(b.hidden);
  const double eps_gated = ts.eps * double(lm.dks) / lm.dkb * double(lm.dvs) / lm.dvb;
  const Padding pad = Padding::for_eps(ts.H, b.hidden, ts.eps, eps_gated, r);
  need(pad.eps_big(ts.H, b.hidden, draft_eps) > 0, "the draft's rms_norm_eps is too small for the target's padding constant");
  std::deque<SmallTensor> keep;
  fs::create_directories(out / "target");
  {
    const TensorStore store = TensorStore::open_folder(tdir.string());
    const std::string p = store.find("model.language_model.embed_tokens.weight") ? "model.language_model." : "model.";
    LayerGrower g{store, keep, tm, o.seed, o.dtype, float(std::sqrt(r)), true, true};
    std::vector<GrownTensor> ts_out;
    const SmallTensor* emb = g.get(p + "embed_tokens.weight");
    need(emb->rows == ts.V && emb->cols == ts.H, "embed_tokens has an unexpected shape");
    keep.push_back(with_mean_row(*emb));
    ts_out.push_back(grown_embedding(p + "embed_tokens.weight", keep.back(), b, tm, pad, ts.V, o.seed, o.dtype));
    for (int l = 0; l < b.n_layers; ++l) {
      const std::string name = p + "layers." + std::to_string(l) + ".";
      const bool live = l < ts.L;
      const std::string in_norm = name + "input_layernorm.weight", post_norm = name + "post_attention_layernorm.weight";
      ts_out.push_back(g.hidden_norm(in_norm, live ? &in_norm : nullptr));
      if ((l + 1) % 4 == 0) g.attention(ts_out, name, name, live);
      else linear_layer(g, ts_out, lm, conv, name, name, live);
      ts_out.push_back(g.hidden_norm(post_norm, live ? &post_norm : nullptr));
      g.mlp(ts_out, name, name, live);
    }
    ts_out.push_back(grown_final_norm(g, p + "norm.weight", p + "norm.weight", pad));
    if (!b.tie_embeddings) {
      const SmallTensor* head = ts.tied ? emb : g.get("lm_head.weight");
      keep.push_back(with_mean_row(*head));
      ts_out.push_back(grown_head("lm_head.weight", keep.back(), b, tm, pad, ts.V, o.seed, o.dtype));
    }
    write_grown((out / "target" / "model.safetensors").string(), ts_out);
  }
  nlohmann::ordered_json tj = tcfg;
  nlohmann::ordered_json& tx = nested ? tj["text_config"] : tj;
  // The gated norm's eps exactly (its inputs can be as small as eps itself: a fresh state's
  // readout); the hidden norms, whose mean squares are of order 1, then carry K's bf16
  // rounding (2K^2 off by ~1e-3 of itself, ~1e-10 of their mean square).
  tx = grown_config(tx, b, b.n_layers, eps_gated, o.dtype, "dtype");
  tx["linear_num_key_heads"] = lm.nKb;
  tx["linear_num_value_heads"] = lm.nVb;
  tx["linear_key_head_dim"] = lm.dkb;
  tx["linear_value_head_dim"] = lm.dvb;
  tx["layer_types"] = nlohmann::ordered_json::array();
  for (int l = 0; l < b.n_layers; ++l) tx["layer_types"].push_back((l + 1) % 4 == 0 ? "full_attention" : "linear_attention");
  tx["full_attention_interval"] = 4;
  tx["tie_word_embeddings"] = b.tie_embeddings;
  // mRoPE sections cover the rotated pairs (for text all three carry the same position, so
  // only their sum matters): Qwen3.5's own [11, 11, 10] for 64 rotated dims.
  if (tx.contains("rope_parameters") && tx["rope_parameters"].is_object() && tx["rope_parameters"].contains("mrope_section")) {
    const int pairs = b.rope_dims / 2;
    tx["rope_parameters"]["mrope_section"] = {pairs - 2 * (pairs / 3), pairs / 3, pairs / 3};
    if (pairs == 32) tx["rope_parameters"]["mrope_section"] = {11, 11, 10};
  }
  tj["tie_word_embeddings"] = b.tie_embeddings;
  if (tj.contains("vision_config") && tj["vision_config"].is_object()) tj["vision_config"]["out_hidden_size"] = b.hidden;
  write_json(out / "target" / "config.json", tj);
  return pad;
}

}  // namespace dflash::graft_detail
