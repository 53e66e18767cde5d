// dflash graft: the small pair's tensors grown into the big shape (rules in graft_grow.h and
// docs/graft.md), the configs rewritten, the tokenizer files copied.
#include "models/graft/graft.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "formats/json_file.h"
#include "models/dflash/dflash_draft.h"
#include "models/graft/graft_grow.h"
#include "util/error.h"

namespace dflash {

namespace {

namespace fs = std::filesystem;

struct SmallDims {
  int H, L, nH, nKV, hd, F, V;
  double eps;
  bool tied;
};

int get_int(const nlohmann::json& j, const char* k, const std::string& origin) {
  if (!j.contains(k) || !j[k].is_number_integer() || j[k].get<int64_t>() <= 0)
    throw file_error(origin, std::string("missing or invalid config key '") + k + "'");
  return j[k].get<int>();
}

SmallDims read_dims(const nlohmann::json& j, const std::string& origin) {
  SmallDims d;
  d.H = get_int(j, "hidden_size", origin);
  d.L = get_int(j, "num_hidden_layers", origin);
  d.nH = get_int(j, "num_attention_heads", origin);
  d.nKV = j.contains("num_key_value_heads") ? get_int(j, "num_key_value_heads", origin) : d.nH;
  d.hd = j.contains("head_dim") && !j["head_dim"].is_null() ? get_int(j, "head_dim", origin) : d.H / d.nH;
  d.F = get_int(j, "intermediate_size", origin);
  d.V = get_int(j, "vocab_size", origin);
  d.eps = j.value("rms_norm_eps", 1e-6);
  d.tied = j.value("tie_word_embeddings", false);
  return d;
}

std::string arch_of(const nlohmann::json& j) {
  return j.contains("architectures") && j["architectures"].is_array() && !j["architectures"].empty() &&
                 j["architectures"][0].is_string()
             ? j["architectures"][0].get<std::string>() : "";
}

void need(bool ok, const std::string& what) {
  if (!ok) throw Error("graft: " + what);
}

// Everything the rules need from both sides fits: each big size at least the small one, the
// head dims in a whole ratio, the GQA groups nested (see GrowMaps::small_q_head).
GrowMaps maps_for(const SmallDims& s, const GraftShape& b, const char* who) {
  const std::string w = std::string(who) + " ";
  need(b.hidden >= s.H && b.hidden % 16 == 0, w + "hidden_size " + std::to_string(s.H) + " does not fit the shape's " + std::to_string(b.hidden));
  need(b.head_dim >= s.hd && b.head_dim % s.hd == 0, w + "head_dim must divide the shape's head_dim");
  need(b.n_kv_heads >= s.nKV, w + "has more key/value heads than the shape");
  need(b.n_heads % b.n_kv_heads == 0 && s.nH % s.nKV == 0 && b.n_heads / b.n_kv_heads >= s.nH / s.nKV,
       w + "query heads per key/value head exceed the shape's");
  need(b.ffn >= s.F, w + "intermediate_size exceeds the shape's");
  return GrowMaps{s.H, b.hidden, s.hd, b.head_dim, s.nH, b.n_heads, s.nKV, b.n_kv_heads, s.F, b.ffn};
}

// The decoder-layer tensors both the target and the draft have, for one layer of the big model
// (`live`: it is one of the small model's layers, which keep their index; else an extra one).
struct LayerGrower {
  const TensorStore& store;
  std::deque<SmallTensor>& keep;
  const GrowMaps& m;
  uint64_t seed;
  DType dtype;
  float norm_scale;  // sqrt(H_small / H_big)

  const SmallTensor* get(const std::string& name) {
    keep.push_back(read_small(store, name));
    return &keep.back();
  }

  // An RMSNorm over the hidden size: live weights scaled so the normalised live values are
  // unchanged (the mean square over H_big is H_small/H_big times the small one; eps likewise).
  GrownTensor hidden_norm(const std::string& big, const std::string* small) {
    const SmallTensor* w = small ? get(*small) : nullptr;
    const int Hs = m.Hs;
    const double sc = norm_scale;
    return grow_vector(big, m.Hb, [w, Hs, sc](int64_t i) {
      return w && i < Hs ? float(double(w->v[size_t(i)]) * sc) : 1.0f;
    });
  }

  void layer(std::vector<GrownTensor>& out, const std::string& big, const std::string& small, bool live) {
    const GrowMaps& M = m;
    const int64_t qd = int64_t(M.nHb) * M.hdb, kvd = int64_t(M.nKVb) * M.hdb;
    auto hid = [&M](int64_t c) { return M.hid(int(c)); };
    auto ffn = [&M](int64_t c) { return M.ffn(int(c)); };
    // Extra layers: nothing read from live channels, nothing written into them.
    auto no_read = [&M](int64_t c) { return M.hid(int(c)) != kDead ? kZeroCol : kDead; };
    auto dead_row = [](int64_t) { return kDead; };
    auto no_write = [&M](int64_t r) { return M.hid(int(r)) >= 0 ? kZeroRow : kDead; };
    auto dead_col = [](int64_t) { return kDead; };
    auto mat = [&](const char* n, std::vector<int64_t> shape, const std::function<int(int64_t)>& rows,
                   const std::function<int(int64_t)>& cols) {
      out.push_back(grow_matrix(big + n, std::move(shape), live ? get(small + n) : nullptr, rows, cols, seed, dtype));
    };
    const std::string in_norm = small + "input_layernorm.weight", post_norm = small + "post_attention_layernorm.weight";
    out.push_back(hidden_norm(big + "input_layernorm.weight", live ? &in_norm : nullptr));
    if (live) {
      mat("self_attn.q_proj.weight", {qd, M.Hb}, [&M](int64_t r) { return M.qrow(int(r)); }, hid);
      mat("self_attn.k_proj.weight", {kvd, M.Hb}, [&M](int64_t r) { return M.krow(int(r)); }, hid);
      mat("self_attn.v_proj.weight", {kvd, M.Hb}, [&M](int64_t r) { return M.vrow(int(r)); }, hid);
      // Per-head norms over head_dim: the live dims' mean square over hdb is hds/hdb of the
      // small one, which k_norm's sqrt(hds/hdb) undoes. q_norm is left as trained: the
      // resulting factor sqrt(hdb/hds) on q turns the big score scale 1/sqrt(hdb) into the
      // small 1/sqrt(hds). (eps: see graft_pair.)
      const SmallTensor* qn = get(small + "self_attn.q_norm.weight");
      const SmallTensor* kn = get(small + "self_attn.k_norm.weight");
      const int f = M.f();
      const double ks = std::sqrt(double(M.hds) / double(M.hdb));
      out.push_back(grow_vector(big + "self_attn.q_norm.weight", M.hdb, [qn, f](int64_t d) {
        return d % f == 0 ? qn->v[size_t(d / f)] : 1.0f;
      }));
      out.push_back(grow_vector(big + "self_attn.k_norm.weight", M.hdb, [kn, f, ks](int64_t d) {
        return d % f == 0 ? float(double(kn->v[size_t(d / f)]) * ks) : 1.0f;
      }));
      mat("self_attn.o_proj.weight", {M.Hb, qd}, hid, [&M](int64_t c) { return M.ocol(int(c)); });
    } else {
      mat("self_attn.q_proj.weight", {qd, M.Hb}, dead_row, no_read);
      mat("self_attn.k_proj.weight", {kvd, M.Hb}, dead_row, no_read);
      mat("self_attn.v_proj.weight", {kvd, M.Hb}, dead_row, no_read);
      out.push_back(grow_vector(big + "self_attn.q_norm.weight", M.hdb, [](int64_t) { return 1.0f; }));
      out.push_back(grow_vector(big + "self_attn.k_norm.weight", M.hdb, [](int64_t) { return 1.0f; }));
      mat("self_attn.o_proj.weight", {M.Hb, qd}, no_write, dead_col);
    }
    out.push_back(hidden_norm(big + "post_attention_layernorm.weight", live ? &post_norm : nullptr));
    if (live) {
      mat("mlp.gate_proj.weight", {M.Fb, M.Hb}, ffn, hid);
      mat("mlp.up_proj.weight", {M.Fb, M.Hb}, ffn, hid);
      mat("mlp.down_proj.weight", {M.Hb, M.Fb}, hid, ffn);
    } else {
      mat("mlp.gate_proj.weight", {M.Fb, M.Hb}, dead_row, no_read);
      mat("mlp.up_proj.weight", {M.Fb, M.Hb}, dead_row, no_read);
      mat("mlp.down_proj.weight", {M.Hb, M.Fb}, no_write, dead_col);
    }
  }
};

// The LM head's live rows plus one more, the mean of the live rows, which every padding row
// gets on the live channels: that part of a padding logit is the mean of the live logits at
// that position, never above their maximum. The constant channels (Padding below) then take
// it far lower.
SmallTensor with_mean_row(const SmallTensor& head) {
  SmallTensor t = head;
  std::vector<double> mean(size_t(head.cols), 0.0);
  for (int64_t r = 0; r < head.rows; ++r)
    for (int64_t c = 0; c < head.cols; ++c) mean[size_t(c)] += head.at(r, c);
  for (int64_t c = 0; c < head.cols; ++c) t.v.push_back(float(mean[size_t(c)] / double(head.rows)));
  t.rows += 1;
  t.shape[0] += 1;
  return t;
}

void copy_if_present(const fs::path& from_dir, const fs::path& to_dir, const char* name) {
  if (fs::exists(from_dir / name)) fs::copy_file(from_dir / name, to_dir / name, fs::copy_options::overwrite_existing);
}

void write_json(const fs::path& p, const nlohmann::ordered_json& j) {
  std::ofstream f(p);
  f << j.dump(2) << "\n";
  if (!f) throw file_error(p.string(), "cannot write");
}

const char* torch_dtype(DType t) { return t == DType::F32 ? "float32" : "bfloat16"; }

// A small config rewritten for the big shape: the sizes target and draft share, `layers`
// layers, the rescaled eps; per-layer lists (sliding windows, causality) grow with the layers,
// extra layers repeating the last kind (they compute nothing either way).
nlohmann::ordered_json grown_config(nlohmann::ordered_json j, const GraftShape& b, int layers, double eps, DType dtype) {
  j["hidden_size"] = b.hidden;
  j["num_hidden_layers"] = layers;
  j["num_attention_heads"] = b.n_heads;
  j["num_key_value_heads"] = b.n_kv_heads;
  j["head_dim"] = b.head_dim;
  j["intermediate_size"] = b.ffn;
  j["vocab_size"] = b.vocab;
  j["rms_norm_eps"] = eps;
  if (j.contains("layer_types") && j["layer_types"].is_array() && !j["layer_types"].empty())
    while (int(j["layer_types"].size()) < layers) j["layer_types"].push_back(j["layer_types"].back());
  j["torch_dtype"] = torch_dtype(dtype);
  return j;
}

// Padding ids (the big vocabulary past the small one) must never win, also at temperature > 0
// where ~148k of them would share real mass if they sat at an ordinary logit. Two dead
// channels c0 = Hs, c1 = Hs+1 of the residual stream carry a constant K (the embedding writes
// it for every live token; no matrix reads it, no row writes it, so it stays K). The final
// norm weights them +W and -W, so there n[c0] = -n[c1] = K W / rms > 0 at every position.
// LM head rows: live tokens K, K (tied: the embedding is the head) or 0, 0 (untied) on
// (c0, c1), whose contributions cancel: K n0 + K (-n0) = 0; padding tokens -M, +M, which add
// -2 M n0: with W = 64 sqrt(r) / K this is -2 M 64 / rms_small, about -1e4 for the demo.
// The constant adds 2 K^2 to every hidden RMSNorm's sum of squares; rms_norm_eps absorbs it:
// (S + 2K^2)/H_big + eps_big = r (S/H_small + eps_small) for eps_big = (H_small eps_small -
// 2K^2)/H_big, so the normalised live values stay exact. K is a power of two (exact in bf16)
// with 2K^2 at most half of H_small eps_small, leaving eps_big positive.
struct Padding {
  float K = 0, W = 0, M = 1024;
  static Padding make(int Hs, double eps, double r) {
    Padding p;
    double k = 1.0;
    while (2 * k * k > Hs * eps / 2) k /= 2;
    p.K = float(k);
    p.W = float(64 * std::sqrt(r) / k);
    return p;
  }
  double eps_big(int Hs, int Hb, double eps_small) const { return (Hs * eps_small - 2.0 * double(K) * K) / Hb; }
};

}  // namespace

void graft_pair(const GraftOptions& o) {
  const GraftShape& b = o.shape;
  const fs::path tdir(o.model), ddir(o.draft), out(o.out);
  const std::string tcfg_path = (tdir / "config.json").string(), dcfg_path = (ddir / "config.json").string();
  const nlohmann::ordered_json tcfg = nlohmann::ordered_json::parse(read_json_file(tcfg_path).dump());
  const nlohmann::ordered_json dcfg = nlohmann::ordered_json::parse(read_json_file(dcfg_path).dump());
  need(arch_of(tcfg) == "Qwen3ForCausalLM", tcfg_path + ": the small target must be a Qwen3ForCausalLM (dense Qwen3)");
  const std::string darch = arch_of(dcfg);
  need(darch == "DFlashDraftModel" || darch == "DFlash2DraftModel", dcfg_path + ": the draft must be a DFlash or DFlash2 draft");
  const SmallDims ts = read_dims(tcfg, tcfg_path), ds = read_dims(dcfg, dcfg_path);
  need(!tcfg.contains("rope_scaling") || tcfg["rope_scaling"].is_null(), "rope scaling is not supported");
  need(b.n_layers >= ts.L, "the small target has more layers than the shape");
  need(b.draft_layers >= ds.L, "the small draft has more layers than the grown draft");
  need(b.vocab >= ts.V, "the small vocabulary exceeds the shape's");
  need(ds.H == ts.H, "the draft's hidden size differs from its target's");
  need(ts.tied || !b.tie_embeddings, "a tied shape cannot carry an untied small head");
  const GrowMaps tm = maps_for(ts, b, "the small target's");
  const GrowMaps dm = maps_for(ds, b, "the small draft's");
  // RMSNorm over H: mean(x^2) over H_big is r = H_small/H_big times mean(x^2) over H_small, so
  // live weights * sqrt(r) and eps * r (less the constant channels' share, Padding) keep the
  // normalised live values. The per-head q/k norms share this eps (one rms_norm_eps per config)
  // but would want eps * hds/hdb: a head's mean square then carries less than eps (1e-6) too
  // little against values of order 1, which moves logits by ~5e-7 relative, inside the tests'
  // 1e-5 (docs/graft.md).
  const double r = double(ts.H) / double(b.hidden);
  const float sr = float(std::sqrt(r));
  need(b.hidden >= ts.H + kConstChannels, "the shape needs two hidden channels beyond the small model's");
  // The draft's residual must carry the same constant as the target's (see Padding).
  need(!dcfg.contains("input_embedding_scale") || !dcfg["input_embedding_scale"].is_number() ||
           dcfg["input_embedding_scale"].get<double>() == 1.0,
       "a draft with input_embedding_scale != 1 is not supported");
  const Padding pad = Padding::make(ts.H, std::min(ts.eps, ds.eps), r);
  const int Hs = ts.H, c0 = Hs, c1 = Hs + 1;
  // The final norms: live weights rescaled, +W and -W on the constant channels.
  auto final_norm = [&](LayerGrower& g, const std::string& big, const std::string& small) {
    return patched(g.hidden_norm(big, &small), [c0, c1, pad](int64_t, float* out) {
      out[c0] = pad.W;
      out[c1] = -pad.W;
    });
  };

  fs::create_directories(out / "target");
  fs::create_directories(out / "draft");
  std::deque<SmallTensor> keep;

  // ---- target ----
  {
    const TensorStore store = TensorStore::open_folder(tdir.string());
    const std::string p = store.find("model.embed_tokens.weight") ? "model." : "";
    LayerGrower g{store, keep, tm, o.seed, o.dtype, sr};
    std::vector<GrownTensor> ts_out;
    const SmallTensor* emb = g.get(p + "embed_tokens.weight");
    need(emb->rows == ts.V && emb->cols == ts.H, "embed_tokens has an unexpected shape");
    keep.push_back(with_mean_row(*emb));
    const SmallTensor* emb_ext = &keep.back();
    const int Vs = ts.V;
    auto vocab_row = [Vs](int64_t v) { return v < Vs ? int(v) : Vs; };  // padding -> the mean row
    // The embedding is the residual stream's input: dead channels exactly zero but the two
    // constant ones (K for live tokens; -M, +M for padding, as the tied head needs).
    ts_out.push_back(patched(grow_matrix(p + "embed_tokens.weight", {b.vocab, b.hidden}, emb_ext, vocab_row,
                                         [&tm](int64_t c) { return tm.hid(int(c)) >= 0 ? int(c) : kZeroCol; }, o.seed,
                                         o.dtype),
                             [Vs, c0, c1, pad](int64_t v, float* out) {
                               out[c0] = v < Vs ? pad.K : -pad.M;
                               out[c1] = v < Vs ? pad.K : pad.M;
                             }));
    for (int l = 0; l < b.n_layers; ++l)
      g.layer(ts_out, p + "layers." + std::to_string(l) + ".", p + "layers." + std::to_string(l) + ".", l < ts.L);
    const std::string fn = p + "norm.weight";
    ts_out.push_back(final_norm(g, fn, fn));
    if (!b.tie_embeddings) {
      const SmallTensor* head = ts.tied ? emb : g.get("lm_head.weight");
      keep.push_back(with_mean_row(*head));
      const SmallTensor* head_ext = &keep.back();
      ts_out.push_back(patched(grow_matrix("lm_head.weight", {b.vocab, b.hidden}, head_ext, vocab_row,
                                           [&tm](int64_t c) { return tm.hid(int(c)); }, o.seed, o.dtype),
                               [Vs, c0, c1, pad](int64_t v, float* out) {
                                 out[c0] = v < Vs ? 0.0f : -pad.M;
                                 out[c1] = v < Vs ? 0.0f : pad.M;
                               }));
    }
    write_grown((out / "target" / "model.safetensors").string(), ts_out);
  }
  nlohmann::ordered_json tj = grown_config(tcfg, b, b.n_layers, pad.eps_big(ts.H, b.hidden, ts.eps), o.dtype);
  tj["tie_word_embeddings"] = b.tie_embeddings;
  if (tj.contains("max_window_layers")) tj["max_window_layers"] = b.n_layers;
  write_json(out / "target" / "config.json", tj);
  for (const char* n : {"tokenizer.json", "tokenizer_config.json", "generation_config.json", "chat_template.jinja",
                        "special_tokens_map.json", "vocab.json", "merges.txt"})
    copy_if_present(tdir, out / "target", n);

  // ---- draft ----
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
  {
    const TensorStore store = TensorStore::open_folder(ddir.string());
    const std::string p = store.find("fc.weight") ? "" : "model.";
    LayerGrower g{store, keep, dm, o.seed + 1, o.dtype, sr};
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
    ds_out.push_back(final_norm(g, "norm.weight", nn));
    if (v2) {
      // The selector keeps its rank; it reads the live channels of the normed hidden state.
      const SmallTensor* hp = g.get(p + "candidate_selector.hidden_projection.weight");
      const int R = int(hp->rows);
      ds_out.push_back(grow_matrix("candidate_selector.hidden_projection.weight", {R, Hb}, hp,
                                   [](int64_t r) { return int(r); }, [&dm](int64_t c) { return dm.hid(int(c)); },
                                   g.seed, o.dtype));
      // Codebooks: padding tokens never become candidates (their logits sit at the mean), so
      // their rows are zero.
      const int Vs = ts.V;
      for (const char* cb : {"candidate_selector.predecessor_codebook", "candidate_selector.successor_codebook"})
        ds_out.push_back(grow_matrix(cb, {b.vocab, R}, g.get(p + cb), [Vs](int64_t v) { return v < Vs ? int(v) : kDead; },
                                     [](int64_t c) { return int(c); }, g.seed, o.dtype));
    }
    write_grown((out / "draft" / "model.safetensors").string(), ds_out);
  }
  nlohmann::ordered_json dj = grown_config(dcfg, b, b.draft_layers, pad.eps_big(ds.H, b.hidden, ds.eps), o.dtype);
  dj["num_target_layers"] = b.n_layers;
  if (dj.contains("target_layer_ids")) dj["target_layer_ids"] = taps;
  else {
    if (!dj.contains("dflash_config") || !dj["dflash_config"].is_object()) dj["dflash_config"] = nlohmann::ordered_json::object();
    dj["dflash_config"]["target_layer_ids"] = taps;
  }
  write_json(out / "draft" / "config.json", dj);

  nlohmann::ordered_json gj;
  gj["source_target"] = fs::absolute(tdir).lexically_normal().string();
  gj["source_draft"] = fs::absolute(ddir).lexically_normal().string();
  gj["shape"] = b.name;
  gj["dtype"] = o.dtype == DType::F32 ? "f32" : "bf16";
  gj["seed"] = o.seed;
  gj["target"] = {{"hidden_size", b.hidden}, {"num_hidden_layers", b.n_layers}, {"num_attention_heads", b.n_heads},
                  {"num_key_value_heads", b.n_kv_heads}, {"head_dim", b.head_dim}, {"intermediate_size", b.ffn},
                  {"vocab_size", b.vocab}, {"tie_word_embeddings", b.tie_embeddings}};
  gj["draft_layers"] = b.draft_layers;
  gj["live"] = {{"hidden_size", ts.H}, {"num_hidden_layers", ts.L}, {"num_attention_heads", ts.nH},
                {"num_key_value_heads", ts.nKV}, {"head_dim", ts.hd}, {"intermediate_size", ts.F}, {"vocab_size", ts.V},
                {"draft_layers", ds.L}};
  write_json(out / "graft.json", gj);
}

}  // namespace dflash
