// GGUF -> DenseModel. Tensors whose type the kernels read (F32, F16, BF16, Q8_0, Q4_0, Q4_K,
// Q6_K) stay in the mapping; only a different --weights, or llama's q/k row order, costs a copy.
#include "models/dense/dense_gguf_load.h"

#include <cmath>
#include <cstring>

#include "kernels/numeric.h"
#include "models/dense/arch_spec.h"
#include "models/dense/dense_tensors.h"
#include "models/gguf_tokenizer.h"
#include "models/gguf_weights.h"
#include "util/error.h"

namespace dflash {

namespace {

int need_int(const GgufFile& f, const std::string& key) {
  auto v = f.get_int(key);
  if (!v) throw file_error(f.path(), "missing metadata key '" + key + "'");
  if (*v <= 0 || *v > (1 << 24)) throw file_error(f.path(), "metadata key '" + key + "' must be a positive integer");
  return int(*v);
}


}  // namespace

ModelConfig gguf_model_config(const GgufFile& f) {
  const auto arch = f.get_string("general.architecture");
  if (!arch) throw file_error(f.path(), "missing metadata key 'general.architecture'");
  ModelConfig c;
  c.arch = find_arch_by_model_type(*arch);
  if (!c.arch)
    throw file_error(f.path(), "unknown architecture '" + *arch + "' (supported from GGUF: qwen3, qwen2, llama)");
  c.architecture = c.arch->hf_name;
  const std::string a = *arch + ".";
  c.hidden = need_int(f, a + "embedding_length");
  c.n_layers = need_int(f, a + "block_count");
  c.n_heads = need_int(f, a + "attention.head_count");
  c.n_kv_heads = f.find(a + "attention.head_count_kv") ? need_int(f, a + "attention.head_count_kv") : c.n_heads;
  c.head_dim = f.find(a + "attention.key_length") ? need_int(f, a + "attention.key_length") : c.hidden / c.n_heads;
  if (f.find(a + "attention.value_length") && need_int(f, a + "attention.value_length") != c.head_dim)
    throw file_error(f.path(), "attention.value_length differs from attention.key_length (not supported)");
  c.ffn = need_int(f, a + "feed_forward_length");
  if (c.n_heads % c.n_kv_heads != 0)
    throw file_error(f.path(), "attention.head_count must be a multiple of attention.head_count_kv");
  if (c.head_dim % 2 != 0) throw file_error(f.path(), "attention.key_length must be even for RoPE");
  c.rms_eps = f.get_float(a + "attention.layer_norm_rms_epsilon").value_or(1e-6);
  c.rope_theta = f.get_float(a + "rope.freq_base").value_or(10000.0);
  c.max_position = f.find(a + "context_length") ? need_int(f, a + "context_length") : 4096;
  const std::string st = f.get_string(a + "rope.scaling.type").value_or("none");
  if (st == "linear" || st == "yarn") {
    c.rope_scaling.type = st;
    c.rope_scaling.factor = f.get_float(a + "rope.scaling.factor").value_or(1.0);
    if (st == "yarn") {
      c.rope_scaling.original_max_position = f.get_float(a + "rope.scaling.original_context_length").value_or(c.max_position);
      c.rope_scaling.attention_factor = f.get_float(a + "rope.scaling.attn_factor")
          .value_or(c.rope_scaling.factor <= 1 ? 1.0 : 0.1 * std::log(c.rope_scaling.factor) + 1.0);
    }
  } else if (st != "none") {
    throw file_error(f.path(), "unsupported rope.scaling.type '" + st + "' (supported: none, linear, yarn)");
  }
  const TensorNaming naming = gguf_tensor_naming();
  const std::string emb_name = tensor_name(dense_tensor(DenseRole::Embed), naming);
  const GgufTensor* emb = f.tensor(emb_name);
  if (!emb) throw file_error(f.path(), "missing tensor '" + emb_name + "'");
  if (emb->ne.size() < 2 || emb->ne[1] > (1 << 24)) throw file_error(f.path(), "tensor '" + emb_name + "' is not a matrix");
  c.vocab = int(emb->ne[1]);
  c.tie_embeddings = f.tensor(tensor_name(dense_tensor(DenseRole::LmHead), naming)) == nullptr;
  c.qkv_bias = c.arch->qkv_bias || f.tensor(tensor_name(dense_tensor(DenseRole::Bq), naming, 0)) != nullptr;
  if (auto e = gguf_token_id(f, "tokenizer.ggml.eos_token_id")) c.eos_ids.push_back(*e);
  if (auto e = gguf_token_id(f, "tokenizer.ggml.eot_token_id"); e && (c.eos_ids.empty() || c.eos_ids[0] != *e))
    c.eos_ids.push_back(*e);
  if (auto b = gguf_token_id(f, "tokenizer.ggml.bos_token_id")) c.bos_id = *b;
  return c;
}

struct DenseGgufLoader {
  static std::unique_ptr<DenseModel> load(const std::string& path, LoadOptions& opt) {
    auto file = std::make_shared<GgufFile>(path);
    auto m = std::make_unique<DenseModel>();
    m->backend_ = backend_of(opt);
    m->cfg_ = gguf_model_config(*file);
    m->storage_ = file;
    const ModelConfig& c = m->cfg_;
    const GgufWeights src(*file);
    const TensorNaming naming = dense_gguf_naming(c);
    read_dense_body(*m->backend_, src, naming, c, opt.weights, {m->embed_, m->layers_, m->final_norm_});
    m->lm_head_ = c.tie_embeddings
                      ? read_embedding_as_head(src, naming, c, opt.weights)
                      : read_matrix(src, dense_tensor(DenseRole::LmHead), naming, dense_dims(c), opt.weights);
    m->backend_->prepare_weight(m->lm_head_);
    m->finish_load();
    // llama3-style scaling travels as per-pair frequency divisors.
    const TensorSpec<DenseRole>& rope_freqs = dense_tensor(DenseRole::RopeFreqs);
    if (const std::string name = tensor_name(rope_freqs, naming); src.contains(name)) {
      const auto ff = read_vector(src, rope_freqs, naming, dense_dims(c));
      for (size_t i = 0; i < ff.size(); ++i) {
        if (!(ff[i] > 0)) throw file_error(path, "tensor '" + name + "' holds a non-positive factor");
        m->inv_freq_[i] /= double(ff[i]);
      }
    }
    if (opt.populate) {  // what stays mapped (packed matrices were copied out; the embedding is only gathered from)
      volatile uint8_t sink = 0;
      auto touch = [&](const WeightMatrix& w) {
        if (!w.owner)
          for (size_t i = 0; i < w.bytes(); i += 4096) sink = sink + w.data[i];
      };
      for (const auto& l : m->layers_)
        for (const WeightMatrix* w : {&l.wq, &l.wk, &l.wv, &l.wo, &l.gate, &l.up, &l.down}) touch(*w);
      touch(m->lm_head_);
    }
    return m;
  }
};

std::unique_ptr<DenseModel> load_dense_gguf(const std::string& path, LoadOptions& opt) {
  return DenseGgufLoader::load(path, opt);
}

}  // namespace dflash
