// Building a DenseModel: from a Hugging Face folder, or with random weights of a given shape.

#include "formats/gguf.h"
#include "formats/safetensors.h"
#include "models/dense/arch_spec.h"
#include "models/dense/dense_config.h"
#include "models/dense/dense_tensors.h"
#include "models/dense/dense_gguf_load.h"
#include "models/dense/dense_model.h"
#include "models/weight_loader.h"
#include "util/error.h"
#include "util/mapped_file.h"

namespace dflash {

struct DenseLoader {
  static std::unique_ptr<DenseModel> load(const std::string& dir, LoadOptions& opt) {
    auto m = std::make_unique<DenseModel>();
    m->backend_ = backend_of(opt);
    m->cfg_ = dense_config_from_folder(dir);
    const ModelConfig& c = m->cfg_;
    auto store = std::make_shared<TensorStore>(TensorStore::open_folder(dir));
    m->storage_ = store;
    WeightLoader L(*store, dir);
    const std::string p = L.detect_prefix(dense_tensor(DenseRole::Embed).hf);
    const TensorNaming naming = hf_tensor_naming(p);
    read_dense_body(*m->backend_, L, naming, c, opt.weights, {m->embed_, m->layers_, m->final_norm_});
    // A stored head is checked even when the config ties the head to the embedding.
    const std::string head_name = find_hf_lm_head(L, p);
    const TensorView* head =
        head_name.empty() ? nullptr : &L.get(head_name, tensor_shape(dense_tensor(DenseRole::LmHead), dense_dims(c)));
    if (head && !c.tie_embeddings) {
      m->lm_head_ = L.matrix(*head, opt.weights);
    } else if (c.tie_embeddings) {
      m->lm_head_ = read_embedding_as_head(L, naming, c, opt.weights);
    } else {
      throw missing_lm_head(dir);
    }
    m->backend_->prepare_weight(m->lm_head_);
    m->finish_load();
    return m;
  }

  static std::unique_ptr<DenseModel> random(const ModelConfig& c, WType type, uint64_t seed,
                                             std::shared_ptr<Backend> backend) {
    auto m = std::make_unique<DenseModel>();
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
                                                c.arch->qk_norm, c.qkv_bias));
    m->final_norm_ = ones(H);
    m->lm_head_ = mat(c.vocab, H, type);
    m->backend_->prepare_weight(m->lm_head_);
    m->finish_load();
    return m;
  }
};

std::unique_ptr<DenseModel> DenseModel::load(const std::string& dir, LoadOptions opt) {
  if (has_gguf_suffix(dir)) return load_dense_gguf(dir, opt);
  return DenseLoader::load(dir, opt);
}

std::unique_ptr<DenseModel> DenseModel::random(const ModelConfig& cfg, WType weights, uint64_t seed,
                                                 std::shared_ptr<Backend> backend) {
  return DenseLoader::random(cfg, weights, seed, std::move(backend));
}

}  // namespace dflash
