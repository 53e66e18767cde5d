// Building a Qwen35Model: from a Hugging Face folder (multimodal, text-only or MLX form), from
// a llama.cpp GGUF file (architecture qwen35), or with random weights of a given shape.
#include <cstdio>

#include "formats/gguf.h"
#include "formats/safetensors.h"
#include "models/dense/dense_tensors.h"
#include "models/gguf_weights.h"
#include "models/qwen35/qwen35_config.h"
#include "models/qwen35/qwen35_model.h"
#include "models/weight_loader.h"
#include "util/error.h"

namespace dflash {

void Qwen35Model::finish_load() {
  const ModelConfig& c = cfg_;
  if (int(c.layer_kinds.size()) != c.n_layers || int(layers_.size()) != c.n_layers)
    throw Error("Qwen3.5: " + std::to_string(layers_.size()) + " layers read for num_hidden_layers " +
                std::to_string(c.n_layers));
  int n_att = 0, n_lin = 0;
  slot_.clear();
  linear_layer_ids_.clear();
  for (int l = 0; l < c.n_layers; ++l) {
    if (c.layer_kinds[size_t(l)] == LayerKind::Attention) {
      slot_.push_back(n_att++);
    } else {
      slot_.push_back(n_lin++);
      linear_layer_ids_.push_back(l);
    }
  }
  inv_freq_ = qwen35_inv_freq(c);
}

struct Qwen35Loader {
  static std::unique_ptr<Qwen35Model> load(const std::string& dir, LoadOptions& opt) {
    auto m = std::make_unique<Qwen35Model>();
    m->backend_ = backend_of(opt);
    m->cfg_ = qwen35_config_from_folder(dir);
    const ModelConfig& c = m->cfg_;
    auto store = std::make_shared<TensorStore>(TensorStore::open_folder(dir));
    m->storage_ = store;
    WeightLoader L(*store, dir);
    const std::string p = L.detect_prefix(qwen35_tensor(Qwen35Role::Embed).hf);
    // MLX conversions already hold 1 + w in the zero-centered norms (§2.1).
    Qwen35Storage storage;
    storage.norms_plus_one = p == "language_model.model.";
    report_skipped(*store);
    const TensorNaming naming = hf_tensor_naming(p);
    const TensorDims dims = qwen35_dims(c);
    const Backend& be = *m->backend_;
    m->embed_ = read_matrix(L, qwen35_tensor(Qwen35Role::Embed), naming, dims, opt.weights);
    for (int l = 0; l < c.n_layers; ++l)
      m->layers_.push_back(read_hybrid_layer(be, L, naming, l, c.layer_kinds[size_t(l)], dims, storage, opt.weights));
    m->final_norm_ = centered_norm(read_vector(L, qwen35_tensor(Qwen35Role::FinalNorm), naming, dims), storage);
    const std::string head_name = find_hf_lm_head(L, p);
    const std::vector<int64_t> head_shape{c.vocab, c.hidden};
    const TensorView* head = head_name.empty() ? nullptr : &L.get(head_name, head_shape);
    if (head && !c.tie_embeddings) {
      m->lm_head_ = L.matrix(*head, opt.weights);
    } else if (c.tie_embeddings) {
      m->lm_head_ = L.matrix(tensor_name(qwen35_tensor(Qwen35Role::Embed), naming), c.vocab, c.hidden, opt.weights);
    } else {
      throw missing_lm_head(dir);
    }
    be.prepare_weight(m->lm_head_);
    m->finish_load();
    return m;
  }

  // A GGUF file as llama.cpp's converter writes it (../shared/qwen35-format.md §2.5): the
  // zero-centered norms hold 1 + w, ssm_a holds -exp(A_log), the conv is [channels][kernel],
  // value heads are tiled (put back in grouped order here, so the forward is the folder's).
  // Matrices in a type the kernels read stay in the mapping unless reordered or converted.
  static std::unique_ptr<Qwen35Model> load_gguf(const std::string& path, LoadOptions& opt) {
    auto file = std::make_shared<GgufFile>(path);
    auto m = std::make_unique<Qwen35Model>();
    m->backend_ = backend_of(opt);
    m->cfg_ = qwen35_config_from_gguf(*file);
    m->storage_ = file;
    const ModelConfig& c = m->cfg_;
    const GgufWeights src(*file);
    const TensorNaming naming = gguf_tensor_naming();
    Qwen35Storage storage;
    storage.norms_plus_one = storage.stores_neg_a = true;
    storage.tiled_key_heads = c.linear.key_heads;
    const TensorDims dims = qwen35_dims(c);
    const Backend& be = *m->backend_;
    const TensorSpec<Qwen35Role>& embed = qwen35_tensor(Qwen35Role::Embed);
    m->embed_ = read_matrix(src, embed, naming, dims, opt.weights);
    for (int l = 0; l < c.n_layers; ++l)
      m->layers_.push_back(read_hybrid_layer(be, src, naming, l, c.layer_kinds[size_t(l)], dims, storage, opt.weights));
    m->final_norm_ = centered_norm(read_vector(src, qwen35_tensor(Qwen35Role::FinalNorm), naming, dims), storage);
    // No output.weight: llama.cpp's tied head, the embedding read as a matrix.
    m->lm_head_ = c.tie_embeddings ? src.matrix(tensor_name(embed, naming), c.vocab, c.hidden, opt.weights, 0)
                                   : read_matrix(src, qwen35_tensor(Qwen35Role::LmHead), naming, dims, opt.weights);
    be.prepare_weight(m->lm_head_);
    m->finish_load();
    return m;
  }

  // The vision tower and the MTP block are part of the published checkpoints; a text-only
  // engine without MTP drafting reads neither. Said once, so nobody wonders where they went.
  static void report_skipped(const TensorStore& store) {
    int visual = 0, mtp = 0;
    for (const std::string& n : store.names()) {
      if (n.rfind("mtp.", 0) == 0) ++mtp;
      else if (n.rfind("model.visual.", 0) == 0 || n.rfind("visual.", 0) == 0 || n.rfind("vision_tower.", 0) == 0) ++visual;
    }
    if (visual || mtp)
      std::fprintf(stderr, "dflash: Qwen3.5 checkpoint: skipping %d vision tensors and %d MTP tensors (text only, no MTP)\n",
                   visual, mtp);
  }

  static std::unique_ptr<Qwen35Model> random(const ModelConfig& c, WType type, uint64_t seed,
                                              std::shared_ptr<Backend> backend) {
    auto m = std::make_unique<Qwen35Model>();
    m->cfg_ = c;
    m->backend_ = backend ? std::move(backend) : make_cpu_backend();
    const Backend& be = *m->backend_;
    uint64_t state = seed * 0x9e3779b97f4a7c15ull + 1;
    auto mat = [&](int64_t rows, int64_t cols, WType t) {
      WeightMatrix w = random_weight_matrix(state, rows, cols, t);
      be.prepare_weight(w);
      return w;
    };
    const auto& L = c.linear;
    const int64_t H = c.hidden, qd = int64_t(c.n_heads) * c.head_dim, kvd = int64_t(c.n_kv_heads) * c.head_dim;
    const int64_t C = L.channels(), vd = int64_t(L.value_heads) * L.value_dim;
    m->embed_ = random_weight_matrix(state, c.vocab, H, WType::BF16);
    for (int l = 0; l < c.n_layers; ++l) {
      HybridLayer w;
      w.kind = c.layer_kinds[size_t(l)];
      w.mlp.attn_norm.assign(size_t(H), 1.0f);
      w.mlp.ffn_norm.assign(size_t(H), 1.0f);
      if (w.kind == LayerKind::Attention) {
        w.mlp.wq = mat(2 * qd, H, type);
        w.mlp.wk = mat(kvd, H, type);
        w.mlp.wv = mat(kvd, H, type);
        w.mlp.wo = mat(H, qd, type);
        w.mlp.q_norm = w.mlp.k_norm = std::vector<float>(size_t(c.head_dim), 1.0f);
      } else {
        w.in_qkv = mat(C, H, type);
        w.in_z = mat(vd, H, type);
        w.in_b = mat(L.value_heads, H, type);
        w.in_a = mat(L.value_heads, H, type);
        w.out_proj = mat(H, vd, type);
        WeightMatrix conv = random_weight_matrix(state, C, L.conv_kernel, WType::F32);
        const float* cp = reinterpret_cast<const float*>(conv.data);
        w.conv.assign(cp, cp + C * L.conv_kernel);
        w.neg_a.assign(size_t(L.value_heads), -0.3f);
        w.dt_bias.assign(size_t(L.value_heads), 0.0f);
        w.ssm_norm.assign(size_t(L.value_dim), 1.0f);
      }
      w.mlp.gate = mat(c.ffn, H, type);
      w.mlp.up = mat(c.ffn, H, type);
      w.mlp.down = mat(H, c.ffn, type);
      m->layers_.push_back(std::move(w));
    }
    m->final_norm_.assign(size_t(H), 1.0f);
    m->lm_head_ = mat(c.vocab, H, type);
    m->finish_load();
    return m;
  }
};

std::unique_ptr<Qwen35Model> Qwen35Model::load(const std::string& path, LoadOptions opt) {
  if (has_gguf_suffix(path)) return Qwen35Loader::load_gguf(path, opt);
  return Qwen35Loader::load(path, opt);
}

std::unique_ptr<Qwen35Model> Qwen35Model::random(const ModelConfig& cfg, WType weights, uint64_t seed,
                                                  std::shared_ptr<Backend> backend) {
  return Qwen35Loader::random(cfg, weights, seed, std::move(backend));
}

}  // namespace dflash
