// The pieces of dflash graft that dense and hybrid targets and their drafts share: sizes, the
// decoder layer's attention and MLP, the hidden norms, embedding, head and padding constant.
#include <cmath>
#include <fstream>

#include "kernels/numeric.h"
#include "models/graft/graft_parts.h"
#include "util/error.h"

namespace dflash::graft_detail {

void need(bool ok, const std::string& what) {
  if (!ok) throw Error("graft: " + what);
}

std::string arch_of(const nlohmann::ordered_json& j) {
  return j.contains("architectures") && j["architectures"].is_array() && !j["architectures"].empty() &&
                 j["architectures"][0].is_string()
             ? j["architectures"][0].get<std::string>() : "";
}

namespace {
int get_int(const nlohmann::ordered_json& j, const char* k, const std::string& origin) {
  if (!j.contains(k) || !j[k].is_number_integer() || j[k].get<int64_t>() <= 0)
    throw file_error(origin, std::string("missing or invalid config key '") + k + "'");
  return j[k].get<int>();
}
}  // namespace

SmallDims read_dims(const nlohmann::ordered_json& j, const std::string& origin) {
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

GraftShape draft_shape(const GraftShape& b) {
  GraftShape d = b;
  if (b.draft_heads) d.n_heads = b.draft_heads;
  if (b.draft_kv_heads) d.n_kv_heads = b.draft_kv_heads;
  if (b.draft_head_dim) d.head_dim = b.draft_head_dim;
  if (b.draft_ffn) d.ffn = b.draft_ffn;
  d.rope_dims = 0;
  d.linear_key_heads = d.linear_value_heads = d.linear_key_dim = d.linear_value_dim = d.linear_conv = 0;
  return d;
}

const SmallTensor* LayerGrower::get(const std::string& name) {
  keep.push_back(read_small(store, name));
  return &keep.back();
}

GrownTensor LayerGrower::hidden_norm(const std::string& big, const std::string* small) {
  const SmallTensor* w = small ? get(*small) : nullptr;
  const int Hs = m.Hs;
  const double sc = norm_scale;
  const bool zc = zero_centered;
  return grow_vector(big, m.Hb, [w, Hs, sc, zc](int64_t i) {
    return stored(zc, w && i < Hs ? multiplier(zc, w->v[size_t(i)]) * sc : 1.0);
  });
}

void LayerGrower::mat(std::vector<GrownTensor>& out, const std::string& big, const std::string& small, const char* n,
                      bool live, std::vector<int64_t> shape, const std::function<int(int64_t)>& rows,
                      const std::function<int(int64_t)>& cols) {
  out.push_back(grow_matrix(big + n, std::move(shape), live ? get(small + n) : nullptr, rows, cols, seed, dtype));
}

void LayerGrower::attention(std::vector<GrownTensor>& out, const std::string& big, const std::string& small, bool live) {
  const GrowMaps& M = m;
  const int64_t qd = int64_t(M.nHb) * M.hdb, kvd = int64_t(M.nKVb) * M.hdb;
  auto hid = [&M](int64_t c) { return M.hid(int(c)); };
  auto no_read = [&M](int64_t c) { return M.hid(int(c)) != kDead ? kZeroCol : kDead; };
  auto dead_row = [](int64_t) { return kDead; };
  auto no_write = [&M](int64_t r) { return M.hid(int(r)) >= 0 ? kZeroRow : kDead; };
  auto dead_col = [](int64_t) { return kDead; };
  // Gated attention (Qwen3.5): head h's rows are [query hd | gate hd]. The gate multiplies the
  // attention output per dim, whose live dims are the small ones first (GrowMaps::vrow).
  const bool gq = gated_q;
  auto qrow = [&M, gq](int64_t r) {
    if (!gq) return M.qrow(int(r));
    const int hb = int(r / (2 * M.hdb)), w = int(r % (2 * M.hdb)), hs = M.small_q_head(hb);
    if (hs < 0) return kDead;
    if (w < M.hdb) return w % M.f() == 0 ? hs * 2 * M.hds + w / M.f() : kDead;
    return w - M.hdb < M.hds ? hs * 2 * M.hds + M.hds + (w - M.hdb) : kDead;
  };
  const int64_t qrows = gq ? 2 * qd : qd;
  const std::string a = "self_attn.";
  if (live) {
    mat(out, big, small, "self_attn.q_proj.weight", true, {qrows, M.Hb}, qrow, hid);
    mat(out, big, small, "self_attn.k_proj.weight", true, {kvd, M.Hb}, [&M](int64_t r) { return M.krow(int(r)); }, hid);
    mat(out, big, small, "self_attn.v_proj.weight", true, {kvd, M.Hb}, [&M](int64_t r) { return M.vrow(int(r)); }, hid);
    // Per-head norms over head_dim: the live dims' mean square over hdb is hds/hdb of the
    // small one, which k_norm's sqrt(hds/hdb) undoes. q_norm is left as trained: the resulting
    // factor sqrt(hdb/hds) on q turns the big score scale 1/sqrt(hdb) into the small
    // 1/sqrt(hds). (eps: see graft_pair.)
    const SmallTensor* qn = get(small + a + "q_norm.weight");
    const SmallTensor* kn = get(small + a + "k_norm.weight");
    const int f = M.f();
    const double ks = std::sqrt(double(M.hds) / double(M.hdb));
    const bool zc = zero_centered;
    out.push_back(grow_vector(big + a + "q_norm.weight", M.hdb, [qn, f, zc](int64_t d) {
      return stored(zc, d % f == 0 ? multiplier(zc, qn->v[size_t(d / f)]) : 1.0);
    }));
    out.push_back(grow_vector(big + a + "k_norm.weight", M.hdb, [kn, f, ks, zc](int64_t d) {
      return stored(zc, d % f == 0 ? multiplier(zc, kn->v[size_t(d / f)]) * ks : 1.0);
    }));
    mat(out, big, small, "self_attn.o_proj.weight", true, {M.Hb, qd}, hid, [&M](int64_t c) { return M.ocol(int(c)); });
  } else {
    mat(out, big, small, "self_attn.q_proj.weight", false, {qrows, M.Hb}, dead_row, no_read);
    mat(out, big, small, "self_attn.k_proj.weight", false, {kvd, M.Hb}, dead_row, no_read);
    mat(out, big, small, "self_attn.v_proj.weight", false, {kvd, M.Hb}, dead_row, no_read);
    const float one = stored(1.0);
    out.push_back(grow_vector(big + a + "q_norm.weight", M.hdb, [one](int64_t) { return one; }));
    out.push_back(grow_vector(big + a + "k_norm.weight", M.hdb, [one](int64_t) { return one; }));
    mat(out, big, small, "self_attn.o_proj.weight", false, {M.Hb, qd}, no_write, dead_col);
  }
}

void LayerGrower::mlp(std::vector<GrownTensor>& out, const std::string& big, const std::string& small, bool live) {
  const GrowMaps& M = m;
  auto hid = [&M](int64_t c) { return M.hid(int(c)); };
  auto ffn = [&M](int64_t c) { return M.ffn(int(c)); };
  auto no_read = [&M](int64_t c) { return M.hid(int(c)) != kDead ? kZeroCol : kDead; };
  auto dead_row = [](int64_t) { return kDead; };
  auto no_write = [&M](int64_t r) { return M.hid(int(r)) >= 0 ? kZeroRow : kDead; };
  auto dead_col = [](int64_t) { return kDead; };
  if (live) {
    mat(out, big, small, "mlp.gate_proj.weight", true, {M.Fb, M.Hb}, ffn, hid);
    mat(out, big, small, "mlp.up_proj.weight", true, {M.Fb, M.Hb}, ffn, hid);
    mat(out, big, small, "mlp.down_proj.weight", true, {M.Hb, M.Fb}, hid, ffn);
  } else {
    mat(out, big, small, "mlp.gate_proj.weight", false, {M.Fb, M.Hb}, dead_row, no_read);
    mat(out, big, small, "mlp.up_proj.weight", false, {M.Fb, M.Hb}, dead_row, no_read);
    mat(out, big, small, "mlp.down_proj.weight", false, {M.Hb, M.Fb}, no_write, dead_col);
  }
}

void LayerGrower::layer(std::vector<GrownTensor>& out, const std::string& big, const std::string& small, bool live) {
  const std::string in_norm = small + "input_layernorm.weight", post_norm = small + "post_attention_layernorm.weight";
  out.push_back(hidden_norm(big + "input_layernorm.weight", live ? &in_norm : nullptr));
  attention(out, big, small, live);
  out.push_back(hidden_norm(big + "post_attention_layernorm.weight", live ? &post_norm : nullptr));
  mlp(out, big, small, live);
}

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

Padding Padding::make(int Hs, double eps, double r) {
  Padding p;
  double k = 1.0;
  while (2 * k * k > Hs * eps / 2) k /= 2;
  p.K = float(k);
  p.W = float(64 * std::sqrt(r) / k);
  return p;
}

Padding Padding::for_eps(int Hs, int Hb, double eps, double eps_big_wanted, double r) {
  const double k2 = (Hs * eps - Hb * eps_big_wanted) / 2;
  need(k2 > 0, "the shape's hidden size is too large for the small model's linear-attention head sizes: the gated "
               "norm wants rms_norm_eps " + std::to_string(eps_big_wanted) + ", above what the hidden norms allow (" +
               std::to_string(Hs * eps / Hb) + "); see docs/graft.md");
  Padding p;
  p.K = bf16_to_f32(f32_to_bf16(float(std::sqrt(k2))));
  p.W = float(64 * std::sqrt(r) / p.K);
  need(p.eps_big(Hs, Hb, eps) > 0, "no padding constant fits the small model's rms_norm_eps");
  return p;
}

namespace {
std::function<int(int64_t)> vocab_rows(int Vs) {
  return [Vs](int64_t v) { return v < Vs ? int(v) : Vs; };  // padding -> the mean row
}
}  // namespace

GrownTensor grown_embedding(const std::string& name, const SmallTensor& emb, const GraftShape& b, const GrowMaps& m,
                            const Padding& pad, int Vs, uint64_t seed, DType dtype) {
  // The residual stream's input: dead channels exactly zero but the two constant ones.
  const int c0 = m.Hs, c1 = m.Hs + 1;
  return patched(grow_matrix(name, {b.vocab, b.hidden}, &emb, vocab_rows(Vs),
                             [&m](int64_t c) { return m.hid(int(c)) >= 0 ? int(c) : kZeroCol; }, seed, dtype),
                 [Vs, c0, c1, pad](int64_t v, float* out) {
                   out[c0] = v < Vs ? pad.K : -pad.M;
                   out[c1] = v < Vs ? pad.K : pad.M;
                 });
}

GrownTensor grown_head(const std::string& name, const SmallTensor& head, const GraftShape& b, const GrowMaps& m,
                       const Padding& pad, int Vs, uint64_t seed, DType dtype) {
  const int c0 = m.Hs, c1 = m.Hs + 1;
  return patched(grow_matrix(name, {b.vocab, b.hidden}, &head, vocab_rows(Vs), [&m](int64_t c) { return m.hid(int(c)); },
                             seed, dtype),
                 [Vs, c0, c1, pad](int64_t v, float* out) {
                   out[c0] = v < Vs ? 0.0f : -pad.M;
                   out[c1] = v < Vs ? 0.0f : pad.M;
                 });
}

GrownTensor grown_final_norm(LayerGrower& g, const std::string& big, const std::string& small, const Padding& pad) {
  const int c0 = g.m.Hs, c1 = g.m.Hs + 1;
  const float wp = g.stored(pad.W), wn = g.stored(-double(pad.W));
  return patched(g.hidden_norm(big, &small), [c0, c1, wp, wn](int64_t, float* out) {
    out[c0] = wp;
    out[c1] = wn;
  });
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

nlohmann::ordered_json grown_config(nlohmann::ordered_json j, const GraftShape& b, int layers, double eps, DType dtype,
                                    const char* dtype_key) {
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
  j[dtype_key] = torch_dtype(dtype);
  return j;
}

}  // namespace dflash::graft_detail
