// GGUF -> DenseModel. Tensors whose type the kernels read (F32, F16, BF16, Q8_0, Q4_0, Q4_K,
// Q6_K) stay in the mapping; only a different --weights, or llama's q/k row order, costs a copy.
#include "models/dense/dense_gguf_load.h"

#include <cmath>
#include <cstring>

#include "kernels/numeric.h"
#include "models/dense/arch_spec.h"
#include "models/dense/dense_config.h"
#include "models/dense/dense_tensors.h"
#include "models/gguf_tokenizer.h"
#include "models/gguf_weights.h"
#include "util/error.h"

namespace dflash {

struct DenseGgufLoader {
  static std::unique_ptr<DenseModel> load(const std::string& path, LoadOptions& opt) {
    auto file = std::make_shared<GgufFile>(path);
    auto m = std::make_unique<DenseModel>();
    m->backend_ = backend_of(opt);
    m->cfg_ = dense_config_from_gguf(*file);
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
