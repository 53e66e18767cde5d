// Building a Transformer: from a Hugging Face folder, or with random weights of a given shape.

#include "formats/gguf.h"
#include "formats/safetensors.h"
#include "models/arch/arch_spec.h"
#include "models/gguf_load.h"
#include "models/transformer.h"
#include "models/weight_loader.h"
#include "util/error.h"
#include "util/mapped_file.h"

namespace dflash {

void prepare_layer(const Backend& be, LayerWeights& w) {
  for (WeightMatrix* m : {&w.wq, &w.wk, &w.wv, &w.wo, &w.gate, &w.up, &w.down}) be.prepare_weight(*m);
}

struct TransformerLoader {
  static std::unique_ptr<Transformer> load(const std::string& dir, LoadOptions& opt) {
    auto m = std::make_unique<Transformer>();
    m->backend_ = backend_of(opt);
    m->cfg_ = ModelConfig::from_folder(dir);
    const ModelConfig& c = m->cfg_;
    auto store = std::make_shared<TensorStore>(TensorStore::open_folder(dir));
    m->storage_ = store;
    WeightLoader L(*store, dir);
    const std::string p = L.detect_prefix("embed_tokens.weight");
    const int64_t H = c.hidden, qd = int64_t(c.n_heads) * c.head_dim, kvd = int64_t(c.n_kv_heads) * c.head_dim;
    // The embedding is only gathered from, never streamed whole: keep it as stored.
    m->embed_ = L.matrix(p + "embed_tokens.weight", c.vocab, H, std::nullopt);
    for (int l = 0; l < c.n_layers; ++l) {
      const std::string lp = p + "layers." + std::to_string(l) + ".";
      LayerWeights w;
      w.wq = L.matrix(lp + "self_attn.q_proj.weight", qd, H, opt.weights);
      w.wk = L.matrix(lp + "self_attn.k_proj.weight", kvd, H, opt.weights);
      w.wv = L.matrix(lp + "self_attn.v_proj.weight", kvd, H, opt.weights);
      w.wo = L.matrix(lp + "self_attn.o_proj.weight", H, qd, opt.weights);
      w.gate = L.matrix(lp + "mlp.gate_proj.weight", c.ffn, H, opt.weights);
      w.up = L.matrix(lp + "mlp.up_proj.weight", c.ffn, H, opt.weights);
      w.down = L.matrix(lp + "mlp.down_proj.weight", H, c.ffn, opt.weights);
      w.attn_norm = L.vector(lp + "input_layernorm.weight", H);
      w.ffn_norm = L.vector(lp + "post_attention_layernorm.weight", H);
      if (c.arch->qk_norm) {
        w.q_norm = L.vector(lp + "self_attn.q_norm.weight", c.head_dim);
        w.k_norm = L.vector(lp + "self_attn.k_norm.weight", c.head_dim);
      }
      if (c.attention_bias) {
        w.bq = L.vector(lp + "self_attn.q_proj.bias", qd);
        w.bk = L.vector(lp + "self_attn.k_proj.bias", kvd);
        w.bv = L.vector(lp + "self_attn.v_proj.bias", kvd);
      }
      prepare_layer(*m->backend_, w);
      m->layers_.push_back(std::move(w));
    }
    m->final_norm_ = L.vector(p + "norm.weight", H);
    // The LM head sits beside the text model: strip the trailing "model." of the prefix.
    std::string head_prefix = p.size() >= 6 && p.compare(p.size() - 6, 6, "model.") == 0 ? p.substr(0, p.size() - 6) : "";
    const TensorView* head = nullptr;
    for (const std::string& name : {head_prefix + "lm_head.weight", std::string("lm_head.weight")})
      if ((head = L.try_get(name))) {
        head = &L.get(name, {c.vocab, H});
        break;
      }
    if (head && !c.tie_embeddings) {
      m->lm_head_ = L.matrix(*head, opt.weights);
    } else if (c.tie_embeddings) {
      m->lm_head_ = L.matrix(p + "embed_tokens.weight", c.vocab, H, opt.weights);
    } else {
      throw file_error(dir, "missing tensor 'lm_head.weight' (and tie_word_embeddings is false)");
    }
    m->backend_->prepare_weight(m->lm_head_);
    m->finish_load();
    return m;
  }

  static std::unique_ptr<Transformer> random(const ModelConfig& c, WType type, uint64_t seed,
                                             std::shared_ptr<Backend> backend) {
    auto m = std::make_unique<Transformer>();
    m->cfg_ = c;
    m->backend_ = backend ? std::move(backend) : make_cpu_backend();
    // xorshift uniform noise: a billion weights in seconds; the values do not matter for speed.
    uint64_t state = seed * 0x9e3779b97f4a7c15ull + 1;
    auto mat = [&](int64_t rows, int64_t cols, WType t) { return random_weight_matrix(state, rows, cols, t); };
    auto ones = [](int64_t n) { return std::vector<float>(size_t(n), 1.0f); };
    const int64_t H = c.hidden;
    m->embed_ = mat(c.vocab, H, WType::BF16);
    for (int l = 0; l < c.n_layers; ++l)
      m->layers_.push_back(random_layer_weights(*m->backend_, state, H, c.n_heads, c.n_kv_heads, c.head_dim, c.ffn, type,
                                                c.arch->qk_norm, c.attention_bias));
    m->final_norm_ = ones(H);
    m->lm_head_ = mat(c.vocab, H, type);
    m->backend_->prepare_weight(m->lm_head_);
    m->finish_load();
    return m;
  }
};

LayerWeights random_layer_weights(const Backend& be, uint64_t& state, int64_t hidden, int n_heads, int n_kv_heads, int head_dim,
                                  int64_t ffn, WType type, bool qk_norm, bool bias) {
  const int64_t H = hidden, qd = int64_t(n_heads) * head_dim, kvd = int64_t(n_kv_heads) * head_dim;
  auto mat = [&](int64_t rows, int64_t cols) { return random_weight_matrix(state, rows, cols, type); };
  LayerWeights w;
  w.wq = mat(qd, H);
  w.wk = mat(kvd, H);
  w.wv = mat(kvd, H);
  w.wo = mat(H, qd);
  w.gate = mat(ffn, H);
  w.up = mat(ffn, H);
  w.down = mat(H, ffn);
  w.attn_norm.assign(size_t(H), 1.0f);
  w.ffn_norm.assign(size_t(H), 1.0f);
  if (qk_norm) w.q_norm = w.k_norm = std::vector<float>(size_t(head_dim), 1.0f);
  if (bias) {
    w.bq.assign(size_t(qd), 0.0f);
    w.bk.assign(size_t(kvd), 0.0f);
    w.bv.assign(size_t(kvd), 0.0f);
  }
  prepare_layer(be, w);
  return w;
}

std::unique_ptr<Transformer> Transformer::load(const std::string& dir, LoadOptions opt) {
  if (has_gguf_suffix(dir)) return load_gguf_transformer(dir, opt);
  return TransformerLoader::load(dir, opt);
}

std::unique_ptr<Transformer> Transformer::random(const ModelConfig& cfg, WType weights, uint64_t seed,
                                                 std::shared_ptr<Backend> backend) {
  return TransformerLoader::random(cfg, weights, seed, std::move(backend));
}

}  // namespace dflash
