// Hugging Face dense model -> one GGUF file that llama.cpp loads, with the metadata and
// tokenizer tables it reads (the inverse of dense_gguf_load.cpp and gguf_tokenizer.cpp).
// Quantized types use the engine's own
// quantizer, so a GGUF q8_0/q4_0 gives exactly the logits of the folder loaded with
// --weights q8/q4. The GGUF container itself is formats/gguf.h's GgufWriter; this file is the
// family's mapping (config keys, its tensor table's names, q/k row order), which needs the
// model and kernel types and so lives with the family rather than in formats/.
#include "models/dense/dense_gguf_write.h"

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>

#include "formats/gguf.h"
#include "formats/safetensors.h"
#include "models/dense/arch_spec.h"
#include "models/dense/dense_config.h"
#include "models/dense/dense_tensors.h"
#include "models/dense/dense_gguf_load.h"
#include "models/gguf_tokenizer.h"
#include "models/gguf_weights.h"
#include "models/model_config.h"
#include "models/weight_loader.h"
#include "util/error.h"
#include "util/mapped_file.h"

namespace dflash {

namespace {

std::vector<uint8_t> matrix_bytes(const WeightMatrix& w, int64_t qk_head_dim) {
  const size_t rb = row_bytes(w.type, w.cols);
  std::vector<uint8_t> out(rb * size_t(w.rows));
  for (int64_t r = 0; r < w.rows; ++r) {
    // Row r of the GGUF tensor holds Hugging Face row src (inverse of llama_qk_gguf_row).
    int64_t src = r;
    if (qk_head_dim) {
      const int64_t h = r / qk_head_dim, g = r % qk_head_dim, half = qk_head_dim / 2;
      src = h * qk_head_dim + (g % 2) * half + g / 2;
    }
    std::memcpy(out.data() + size_t(r) * rb, w.row(src), rb);
  }
  return out;
}

std::vector<uint8_t> f32_bytes(const std::vector<float>& v) {
  std::vector<uint8_t> out(v.size() * 4);
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}

std::string basename_of(std::string p) {
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  const size_t s = p.rfind('/');
  return s == std::string::npos ? p : p.substr(s + 1);
}

}  // namespace

void write_gguf(const ModelConfig& c, const GgufTensorSource& src, const std::string& tokenizer_dir,
                const std::string& name, const std::string& out, WType type) {
  if (type != WType::BF16 && type != WType::Q8_0 && type != WType::Q4_0 && type != WType::F32 && type != WType::F16)
    throw Error("convert: --type must be bf16, q8_0 or q4_0");
  const std::string arch = c.arch->model_type;

  GgufWriter w;
  const std::string a = arch + ".";
  w.add("general.architecture", GgufValue::str(arch));
  w.add("general.name", GgufValue::str(name));
  w.add("general.file_type", GgufValue::u32(gguf_file_type(type)));
  if (type == WType::Q8_0 || type == WType::Q4_0) w.add("general.quantization_version", GgufValue::u32(2));
  w.add(a + "vocab_size", GgufValue::u32(uint32_t(c.vocab)));
  w.add(a + "context_length", GgufValue::u32(uint32_t(c.max_position)));
  w.add(a + "embedding_length", GgufValue::u32(uint32_t(c.hidden)));
  w.add(a + "block_count", GgufValue::u32(uint32_t(c.n_layers)));
  w.add(a + "feed_forward_length", GgufValue::u32(uint32_t(c.ffn)));
  w.add(a + "attention.head_count", GgufValue::u32(uint32_t(c.n_heads)));
  w.add(a + "attention.head_count_kv", GgufValue::u32(uint32_t(c.n_kv_heads)));
  w.add(a + "attention.key_length", GgufValue::u32(uint32_t(c.head_dim)));
  w.add(a + "attention.value_length", GgufValue::u32(uint32_t(c.head_dim)));
  w.add(a + "rope.dimension_count", GgufValue::u32(uint32_t(c.head_dim)));
  w.add(a + "attention.layer_norm_rms_epsilon", GgufValue::f32(float(c.rms_eps)));
  w.add(a + "rope.freq_base", GgufValue::f32(float(c.rope_theta)));
  const RopeScaling& rs = c.rope_scaling;
  std::vector<float> rope_freqs;
  if (rs.type == "linear" || rs.type == "yarn") {
    w.add(a + "rope.scaling.type", GgufValue::str(rs.type));
    w.add(a + "rope.scaling.factor", GgufValue::f32(float(rs.factor)));
    if (rs.type == "yarn") {
      w.add(a + "rope.scaling.original_context_length", GgufValue::u32(uint32_t(rs.original_max_position)));
      w.add(a + "rope.scaling.attn_factor", GgufValue::f32(float(rs.attention_factor)));
    }
  } else if (rs.type == "llama3") {
    // llama.cpp takes llama3 scaling as a divisor per frequency: unscaled / scaled.
    ModelConfig plain = c;
    plain.rope_scaling = RopeScaling{};
    const auto base = rope_inv_freq(plain), scaled = rope_inv_freq(c);
    for (size_t i = 0; i < base.size(); ++i) rope_freqs.push_back(float(base[i] / scaled[i]));
  }
  write_gguf_tokenizer(w, tokenizer_dir, c);

  auto mat = [&](const std::string& gguf, const std::string& hf, int64_t rows, int64_t cols, WType t, int64_t pm) {
    const WeightMatrix m = src.matrix(hf, rows, cols, t);
    w.add_tensor(gguf, {cols, rows}, ggml_type_of(t), matrix_bytes(m, pm));
  };
  auto vec = [&](const std::string& gguf, const std::string& hf, int64_t n, int64_t pm) {
    std::vector<float> v = src.vector(hf, n);
    if (pm) {
      std::vector<float> o(v.size());
      for (size_t r = 0; r < v.size(); ++r) o[size_t(llama_qk_gguf_row(int64_t(r), pm))] = v[r];
      v = std::move(o);
    }
    w.add_tensor(gguf, {n}, GgmlType::F32, f32_bytes(v));
  };
  // Gathered (the embedding): kept in 16 bits (bf16) so that the GGUF and the folder embed
  // identically; a quantized head of a tied model is written out as the head.
  const WType emb_type = type == WType::F32 ? WType::F32 : type == WType::F16 ? WType::F16 : WType::BF16;
  const TensorNaming hf_naming = hf_tensor_naming(), gguf_naming = dense_gguf_naming(c);
  const TensorDims dims = dense_dims(c);
  const TensorConditions when = dense_conditions(c);
  for_each_tensor(dense_tensors(), c.n_layers, [&](const TensorSpec<DenseRole>& t, int l) {
    const std::string gguf = tensor_name(t, gguf_naming, l);
    const std::vector<int64_t> shape = tensor_shape(t, dims);
    if (t.role == DenseRole::RopeFreqs) {  // computed from the config above, not read
      if (!rope_freqs.empty()) w.add_tensor(gguf, {int64_t(rope_freqs.size())}, GgmlType::F32, f32_bytes(rope_freqs));
      return;
    }
    if (t.role == DenseRole::LmHead && c.tie_embeddings) {
      if (type != emb_type)
        mat(gguf, tensor_name(dense_tensor(DenseRole::Embed), hf_naming), shape[0], shape[1], type, 0);
      return;
    }
    if (!present(t, when)) return;
    const int64_t perm = t.special == Special::LlamaQkRows ? gguf_naming.llama_qk_head_dim : 0;
    const std::string hf = tensor_name(t, hf_naming, l);
    if (t.shape.rank == 1)
      vec(gguf, hf, shape[0], perm);
    else
      mat(gguf, hf, shape[0], shape[1], t.special == Special::Gathered ? emb_type : type, perm);
  });
  w.write(out);
}

void convert_to_gguf(const std::string& dir, const std::string& out, WType type) {
  const ModelConfig c = dense_config_from_folder(dir);
  const TensorStore store = TensorStore::open_folder(dir);
  WeightLoader L(store, dir);
  const std::string p = L.detect_prefix(dense_tensor(DenseRole::Embed).hf);
  GgufTensorSource src;
  src.matrix = [&](const std::string& n, int64_t rows, int64_t cols, WType t) {
    if (n == dense_tensor(DenseRole::LmHead).hf) {  // not under the model prefix
      const std::string head = find_hf_lm_head(L, p);
      if (head.empty()) throw missing_lm_head(dir);
      return L.matrix(head, rows, cols, t);
    }
    return L.matrix(p + n, rows, cols, t);
  };
  src.vector = [&](const std::string& n, int64_t len) { return L.vector(p + n, len); };
  write_gguf(c, src, dir, basename_of(dir), out, type);
}

}  // namespace dflash
