// Qwen3.5 folder -> GGUF qwen35 (the inverse of Qwen35Loader::load_gguf). Layers are read
// with the folder loader's own code (read_hybrid_layer: zero-centered norms as 1 + w, A_log as
// -exp(A_log), the conv as [channels][kernel], whatever the folder's form), in the folder's
// dtype; the value heads are then tiled and each matrix encoded once into the output type, so
// a q8_0/q4_0 file holds the blocks the folder loaded with --weights q8/q4 quantizes (a head
// moves as whole 32-blocks when its width is a multiple of 32).
#include "models/qwen35/qwen35_gguf_write.h"

#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>

#include "formats/gguf.h"
#include "formats/json_file.h"
#include "formats/safetensors.h"
#include "models/dense/dense_tensors.h"
#include "models/gguf_tokenizer.h"
#include "models/gguf_weights.h"
#include "models/qwen35/qwen35_config.h"
#include "models/qwen35/qwen35_tensors.h"
#include "models/weight_loader.h"
#include "util/error.h"

namespace dflash {

namespace {

std::vector<uint8_t> f32_bytes(const std::vector<float>& v) {
  std::vector<uint8_t> out(v.size() * sizeof(float));
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}

// The rows of `m` encoded as `type` (the kernels' row layout is GGUF's).
std::vector<uint8_t> matrix_bytes(const WeightMatrix& m, WType type, const std::string& name) {
  if (m.cols % block_elems(type) != 0)
    throw Error("convert: tensor '" + name + "' has " + std::to_string(m.cols) + " columns, not a multiple of " +
                std::to_string(block_elems(type)) + ": cannot store it as " + wtype_name(type));
  const WeightMatrix w = m.type == type ? m : reorder_v_rows(m, VHeadSpan{}, VHeadOrder::Grouped, type);
  const uint8_t* p = w.data;
  return std::vector<uint8_t>(p, p + size_t(w.rows) * row_bytes(type, w.cols));
}

std::string basename_of(std::string p) {
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  const size_t s = p.rfind('/');
  return s == std::string::npos ? p : p.substr(s + 1);
}

// The text model's keys (text_config in the multimodal form, the top level otherwise).
const nlohmann::json& text_config(const nlohmann::json& root) {
  return root.contains("text_config") && root["text_config"].is_object() ? root["text_config"] : root;
}

// llama.cpp's metadata for qwen35 (its converter's set_gguf_parameters).
void add_hparams(GgufWriter& w, const ModelConfig& c, const nlohmann::json& tc, WType type, const std::string& name) {
  const std::string a = "qwen35.";
  auto u32 = [&](const std::string& k, int64_t v) { w.add(a + k, GgufValue::u32(uint32_t(v))); };
  w.add("general.architecture", GgufValue::str("qwen35"));
  w.add("general.name", GgufValue::str(name));
  w.add("general.file_type", GgufValue::u32(gguf_file_type(type)));
  if (type == WType::Q8_0 || type == WType::Q4_0) w.add("general.quantization_version", GgufValue::u32(2));
  u32("vocab_size", c.vocab);
  u32("context_length", c.max_position);
  u32("embedding_length", c.hidden);
  u32("block_count", c.n_layers);
  u32("feed_forward_length", c.ffn);
  u32("attention.head_count", c.n_heads);
  u32("attention.head_count_kv", c.n_kv_heads);
  u32("attention.key_length", c.head_dim);
  u32("attention.value_length", c.head_dim);
  w.add(a + "attention.layer_norm_rms_epsilon", GgufValue::f32(float(c.rms_eps)));
  w.add(a + "rope.freq_base", GgufValue::f32(float(c.rope_theta)));
  u32("rope.dimension_count", c.rope_dims);
  // llama.cpp's loader requires the sections (interleaved mRoPE, [t, h, w, extra]); text
  // positions make them irrelevant to the numbers, but the file must carry them.
  std::vector<GgufValue> sections;
  const nlohmann::json empty = nlohmann::json::object();
  const nlohmann::json& rp = tc.contains("rope_parameters") && tc["rope_parameters"].is_object() ? tc["rope_parameters"] : empty;
  if (rp.contains("mrope_section") && rp["mrope_section"].is_array())
    for (const auto& s : rp["mrope_section"])
      if (s.is_number_integer() && sections.size() < 4) sections.push_back(GgufValue::i32(s.get<int32_t>()));
  if (sections.empty())
    for (int32_t s : {11, 11, 10}) sections.push_back(GgufValue::i32(s));
  while (sections.size() < 4) sections.push_back(GgufValue::i32(0));
  w.add(a + "rope.dimension_sections", GgufValue::array(GgufValueType::I32, std::move(sections)));
  const auto& L = c.linear;
  u32("ssm.conv_kernel", L.conv_kernel);
  u32("ssm.state_size", L.key_dim);
  u32("ssm.group_count", L.key_heads);
  u32("ssm.time_step_rank", L.value_heads);
  u32("ssm.inner_size", int64_t(L.value_heads) * L.value_dim);
  // Per-layer flags only when the config lists the layer types, as llama.cpp's converter does;
  // its loader otherwise derives them from full_attention_interval.
  if (tc.contains("layer_types") && tc["layer_types"].is_array()) {
    std::vector<GgufValue> flags;
    for (LayerKind k : c.layer_kinds) flags.push_back(GgufValue::boolean(k == LayerKind::LinearAttention));
    w.add(a + "attention.recurrent_layers", GgufValue::array(GgufValueType::BOOL, std::move(flags)));
  }
  u32("full_attention_interval", tc.contains("full_attention_interval") && tc["full_attention_interval"].is_number_integer()
                                     ? tc["full_attention_interval"].get<int64_t>() : 4);
}

}  // namespace

void write_qwen35_gguf(const ModelConfig& c, const nlohmann::json& tc, const TensorSource& src,
                       const TensorNaming& naming, const Qwen35Storage& storage, const std::string& head_name,
                       const std::string& tokenizer_dir, const std::string& name, const std::string& out, WType type) {
  if (type != WType::BF16 && type != WType::Q8_0 && type != WType::Q4_0 && type != WType::F32 && type != WType::F16)
    throw Error("convert: --type must be bf16, q8_0, q4_0, f16 or f32");
  const auto& L = c.linear;
  const TensorNaming& hf = naming;
  const TensorNaming gguf = gguf_tensor_naming();
  const TensorDims dims = qwen35_dims(c);
  GgufWriter w;
  add_hparams(w, c, tc, type, name);
  write_gguf_tokenizer(w, tokenizer_dir, c);

  // Gathered rows (the embedding) keep 16 bits, as the dense writer does, so the GGUF and
  // the folder embed identically; a tied head in a quantized file is written as the head.
  const WType emb_type = type == WType::F32 ? WType::F32 : type == WType::F16 ? WType::F16 : WType::BF16;
  const auto backend = make_cpu_backend(1);  // read_hybrid_layer's prepare leaves float matrices as they are
  HybridLayer layer;
  int layer_id = -1;
  for_each_tensor(qwen35_tensors(), c.n_layers, [&](const TensorSpec<Qwen35Role>& t, int l) {
    using R = Qwen35Role;
    const std::string name = tensor_name(t, gguf, l);
    const std::vector<int64_t> shape = tensor_shape(t, dims);
    auto put_matrix = [&](const WeightMatrix& m, WType as) {
      w.add_tensor(name, {m.cols, m.rows}, ggml_type_of(as), matrix_bytes(m, as, name));
    };
    auto put_vector = [&](const std::vector<float>& v) { w.add_tensor(name, {int64_t(v.size())}, GgmlType::F32, f32_bytes(v)); };
    if (t.scope == Scope::Model) {
      if (t.role == R::Embed) {
        put_matrix(src.matrix(tensor_name(t, hf), shape[0], shape[1], std::nullopt, 0), emb_type);
      } else if (t.role == R::FinalNorm) {
        put_vector(centered_norm(read_vector(src, t, hf, dims), storage));
      } else if (t.role == R::LmHead) {
        if (!c.tie_embeddings) {
          put_matrix(src.matrix(head_name, shape[0], shape[1], std::nullopt, 0), type);
        } else if (type != emb_type) {
          put_matrix(src.matrix(tensor_name(qwen35_tensor(R::Embed), hf), shape[0], shape[1], std::nullopt, 0), type);
        }
      }
      return;
    }
    const LayerKind kind = c.layer_kinds[size_t(l)];
    if (l != layer_id) {  // the rows of one layer come together: read it once, in the stored dtype
      layer = read_hybrid_layer(*backend, src, hf, l, kind, dims, storage, std::nullopt);
      reorder_layer_v_heads(layer, L.key_heads, dims, VHeadOrder::Tiled);
      layer_id = l;
    }
    TensorConditions when;
    when.linear_layer = kind == LayerKind::LinearAttention;
    if (!present(t, when)) return;
    const HybridLayer& x = layer;
    switch (t.role) {
      case R::InNorm: put_vector(x.mlp.attn_norm); break;
      case R::PostNorm: put_vector(x.mlp.ffn_norm); break;
      case R::QNorm: put_vector(x.mlp.q_norm); break;
      case R::KNorm: put_vector(x.mlp.k_norm); break;
      case R::Wq: put_matrix(x.mlp.wq, type); break;
      case R::Wk: put_matrix(x.mlp.wk, type); break;
      case R::Wv: put_matrix(x.mlp.wv, type); break;
      case R::Wo: put_matrix(x.mlp.wo, type); break;
      case R::Gate: put_matrix(x.mlp.gate, type); break;
      case R::Up: put_matrix(x.mlp.up, type); break;
      case R::Down: put_matrix(x.mlp.down, type); break;
      case R::InQkv: put_matrix(x.in_qkv, type); break;
      case R::InZ: put_matrix(x.in_z, type); break;
      case R::InB: put_matrix(x.in_b, type); break;
      case R::InA: put_matrix(x.in_a, type); break;
      case R::OutProj: put_matrix(x.out_proj, type); break;
      case R::ALog: put_vector(x.neg_a); break;  // ssm_a: -exp(A_log), f32
      case R::DtBias: put_vector(x.dt_bias); break;
      case R::SsmNorm: put_vector(x.ssm_norm); break;
      case R::Conv:  // squeezed to [channels][kernel]: ggml ne [kernel, channels], f32 as llama.cpp keeps it
        w.add_tensor(name, {dims[Dim::ConvKernel], dims[Dim::LinChannels]}, GgmlType::F32, f32_bytes(x.conv));
        break;
      default: break;
    }
  });
  w.write(out);
}

void convert_qwen35_to_gguf(const std::string& dir, const std::string& out, WType type) {
  const ModelConfig c = qwen35_config_from_folder(dir);
  const nlohmann::json root = read_json_file(dir + "/config.json");
  const auto& L = c.linear;
  if (L.key_dim != L.value_dim || c.head_dim < 32)
    std::fprintf(stderr, "dflash: convert: note: llama.cpp's qwen35 needs linear key dim == value dim (%d, %d) and "
                 "head_dim >= 32 (%d); dflash reads the file either way\n", L.key_dim, L.value_dim, c.head_dim);
  const TensorStore store = TensorStore::open_folder(dir);
  WeightLoader src(store, dir);
  const std::string p = src.detect_prefix(qwen35_tensor(Qwen35Role::Embed).hf);
  Qwen35Storage storage;
  storage.norms_plus_one = p == "language_model.model.";  // the MLX form, as the folder loader says
  const std::string head = find_hf_lm_head(src, p);
  if (!c.tie_embeddings && head.empty()) throw missing_lm_head(dir);
  write_qwen35_gguf(c, text_config(root), src, hf_tensor_naming(p), storage, head, dir, basename_of(dir), out, type);
}

}  // namespace dflash
