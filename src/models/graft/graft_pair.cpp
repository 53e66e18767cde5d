// dflash graft: a small pair's tensors grown into the big shape (rules in graft_grow.h and
// docs/graft.md), the configs rewritten, the tokenizer files copied. This file: the dense
// Qwen3 target and the pair as a whole; graft_qwen35.cpp grows a Qwen3.5 hybrid target,
// graft_draft.cpp the draft.
#include "models/graft/graft.h"

#include <algorithm>
#include <cmath>

#include "formats/json_file.h"
#include "models/graft/graft_parts.h"
#include "util/error.h"

namespace dflash {

using namespace graft_detail;

namespace {

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
Padding grow_dense_target(const GraftOptions& o, const nlohmann::ordered_json& tcfg, const SmallDims& ts,
                          double draft_eps) {
  const GraftShape& b = o.shape;
  const fs::path tdir(o.model), out(o.out);
  need(!tcfg.contains("rope_scaling") || tcfg["rope_scaling"].is_null(), "rope scaling is not supported");
  const GrowMaps tm = maps_for(ts, b, "the small target's");
  // RMSNorm over H: mean(x^2) over H_big is r = H_small/H_big times mean(x^2) over H_small, so
  // live weights * sqrt(r) and eps * r (less the constant channels' share, Padding) keep the
  // normalised live values. The per-head q/k norms share this eps (one rms_norm_eps per config)
  // but would want eps * hds/hdb: a head's mean square then carries less than eps (1e-6) too
  // little against values of order 1, which moves logits by ~5e-7 relative, inside the tests'
  // 1e-5 (docs/graft.md).
  const double r = double(ts.H) / double(b.hidden);
  const Padding pad = Padding::make(ts.H, std::min(ts.eps, draft_eps), r);
  std::deque<SmallTensor> keep;
  fs::create_directories(out / "target");
  {
    const TensorStore store = TensorStore::open_folder(tdir.string());
    const std::string p = store.find("model.embed_tokens.weight") ? "model." : "";
    LayerGrower g{store, keep, tm, o.seed, o.dtype, float(std::sqrt(r))};
    std::vector<GrownTensor> ts_out;
    const SmallTensor* emb = g.get(p + "embed_tokens.weight");
    need(emb->rows == ts.V && emb->cols == ts.H, "embed_tokens has an unexpected shape");
    keep.push_back(with_mean_row(*emb));
    ts_out.push_back(grown_embedding(p + "embed_tokens.weight", keep.back(), b, tm, pad, ts.V, o.seed, o.dtype));
    for (int l = 0; l < b.n_layers; ++l)
      g.layer(ts_out, p + "layers." + std::to_string(l) + ".", p + "layers." + std::to_string(l) + ".", l < ts.L);
    const std::string fn = p + "norm.weight";
    ts_out.push_back(grown_final_norm(g, fn, fn, pad));
    if (!b.tie_embeddings) {
      const SmallTensor* head = ts.tied ? emb : g.get("lm_head.weight");
      keep.push_back(with_mean_row(*head));
      ts_out.push_back(grown_head("lm_head.weight", keep.back(), b, tm, pad, ts.V, o.seed, o.dtype));
    }
    write_grown((out / "target" / "model.safetensors").string(), ts_out);
  }
  nlohmann::ordered_json tj = grown_config(tcfg, b, b.n_layers, pad.eps_big(ts.H, b.hidden, ts.eps), o.dtype);
  tj["tie_word_embeddings"] = b.tie_embeddings;
  if (tj.contains("max_window_layers")) tj["max_window_layers"] = b.n_layers;
  write_json(out / "target" / "config.json", tj);
  return pad;
}

}  // namespace

void graft_pair(const GraftOptions& o) {
  const GraftShape& b = o.shape;
  const fs::path tdir(o.model), ddir(o.draft), out(o.out);
  const std::string tcfg_path = (tdir / "config.json").string(), dcfg_path = (ddir / "config.json").string();
  const nlohmann::ordered_json tcfg = nlohmann::ordered_json::parse(read_json_file(tcfg_path).dump());
  const nlohmann::ordered_json dcfg = nlohmann::ordered_json::parse(read_json_file(dcfg_path).dump());
  const std::string tarch = arch_of(tcfg), darch = arch_of(dcfg);
  const bool hybrid = tarch == "Qwen3_5ForConditionalGeneration" || tarch == "Qwen3_5ForCausalLM";
  if (b.hybrid())
    need(hybrid, tcfg_path + ": a Qwen3.5 shape grows a Qwen3.5 hybrid target (Qwen3_5ForConditionalGeneration), not '" + tarch + "'");
  else
    need(tarch == "Qwen3ForCausalLM", tcfg_path + ": a dense Qwen3 shape grows a Qwen3ForCausalLM target, not '" + tarch +
                                          "' (Qwen3.5 targets grow into the qwen3.5-* shapes)");
  need(darch == "DFlashDraftModel" || darch == "DFlash2DraftModel", dcfg_path + ": the draft must be a DFlash or DFlash2 draft");
  const nlohmann::ordered_json& text = hybrid && tcfg.contains("text_config") && tcfg["text_config"].is_object()
                                           ? tcfg["text_config"] : tcfg;
  SmallDims ts = read_dims(text, tcfg_path);
  if (hybrid) ts.tied = tcfg.value("tie_word_embeddings", ts.tied);
  const SmallDims ds = read_dims(dcfg, dcfg_path);
  need(b.n_layers >= ts.L, "the small target has more layers than the shape");
  need(b.vocab >= ts.V, "the small vocabulary exceeds the shape's");
  need(ts.tied || !b.tie_embeddings, "a tied shape cannot carry an untied small head");
  need(b.hidden >= ts.H + kConstChannels, "the shape needs two hidden channels beyond the small model's");
  // The draft's sizes too, before anything is written.
  need(b.draft_layers >= ds.L, "the small draft has more layers than the grown draft");
  need(ds.H == ts.H, "the draft's hidden size differs from its target's");
  maps_for(ds, draft_shape(b), "the small draft's");

  // The growers create out/target and out/draft once their own checks have passed.
  const Padding pad = hybrid ? grow_qwen35_target(o, tcfg, ts, ds.eps) : grow_dense_target(o, tcfg, ts, ds.eps);
  for (const char* n : {"tokenizer.json", "tokenizer_config.json", "generation_config.json", "chat_template.jinja",
                        "special_tokens_map.json", "vocab.json", "merges.txt", "preprocessor_config.json"})
    copy_if_present(tdir, out / "target", n);
  grow_draft(o, dcfg, ts, pad, double(ts.H) / double(b.hidden));

  const GraftShape db = draft_shape(b);
  nlohmann::ordered_json gj;
  gj["source_target"] = fs::absolute(tdir).lexically_normal().string();
  gj["source_draft"] = fs::absolute(ddir).lexically_normal().string();
  gj["shape"] = b.name;
  gj["dtype"] = o.dtype == DType::F32 ? "f32" : "bf16";
  gj["seed"] = o.seed;
  gj["target"] = {{"hidden_size", b.hidden}, {"num_hidden_layers", b.n_layers}, {"num_attention_heads", b.n_heads},
                  {"num_key_value_heads", b.n_kv_heads}, {"head_dim", b.head_dim}, {"intermediate_size", b.ffn},
                  {"vocab_size", b.vocab}, {"tie_word_embeddings", b.tie_embeddings}};
  if (b.hybrid())
    gj["target"].update({{"linear_num_key_heads", b.linear_key_heads}, {"linear_num_value_heads", b.linear_value_heads},
                         {"linear_key_head_dim", b.linear_key_dim}, {"linear_value_head_dim", b.linear_value_dim},
                         {"rotary_dims", b.rope_dims}});
  gj["draft"] = {{"num_hidden_layers", b.draft_layers}, {"num_attention_heads", db.n_heads},
                 {"num_key_value_heads", db.n_kv_heads}, {"head_dim", db.head_dim}, {"intermediate_size", db.ffn}};
  gj["draft_layers"] = b.draft_layers;
  gj["live"] = {{"hidden_size", ts.H}, {"num_hidden_layers", ts.L}, {"num_attention_heads", ts.nH},
                {"num_key_value_heads", ts.nKV}, {"head_dim", ts.hd}, {"intermediate_size", ts.F}, {"vocab_size", ts.V},
                {"draft_layers", ds.L}};
  gj["padding_constant"] = pad.K;
  write_json(out / "graft.json", gj);
}

}  // namespace dflash
