// Hugging Face model -> one GGUF file that llama.cpp loads, with the metadata and tokenizer
// tables it reads (the inverse of gguf_load.cpp). Quantized types use the engine's own
// quantizer, so a GGUF q8_0/q4_0 gives exactly the logits of the folder loaded with
// --weights q8/q4. The GGUF container itself is formats/gguf.h's GgufWriter; this file is the
// model-level mapping (config, tensor names, q/k row order, tokenizer), which needs the model
// and kernel types and so lives here rather than in formats/.
#include "models/gguf_write.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <nlohmann/json.hpp>

#include "formats/gguf.h"
#include "formats/safetensors.h"
#include "models/arch/arch_spec.h"
#include "models/dense_tensors.h"
#include "models/gguf_load.h"
#include "models/model_config.h"
#include "models/weight_loader.h"
#include "tokenizer/gguf_vocab.h"
#include "tokenizer/json_reader.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"
#include "util/mapped_file.h"

namespace dflash {

namespace {

GgmlType ggml_of(WType t) {
  switch (t) {
    case WType::F32: return GgmlType::F32;
    case WType::F16: return GgmlType::F16;
    case WType::BF16: return GgmlType::BF16;
    case WType::Q8_0: return GgmlType::Q8_0;
    case WType::Q4_0: return GgmlType::Q4_0;
    default: throw Error(std::string("convert: no GGUF type for ") + wtype_name(t));
  }
}

// llama.cpp's general.file_type numbering (LLAMA_FTYPE_*).
uint32_t file_type_of(WType t) {
  switch (t) {
    case WType::F32: return 0;
    case WType::F16: return 1;
    case WType::Q4_0: return 2;
    case WType::Q8_0: return 7;
    case WType::BF16: return 32;
    default: return 0;
  }
}

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

// tokenizer.json (+ config) -> tokenizer.ggml.* with one token per embedding row.
void add_tokenizer(GgufWriter& w, const std::string& dir, const ModelConfig& c) {
  const std::string tj_path = dir + "/tokenizer.json";
  if (!file_exists(tj_path)) throw file_error(tj_path, "not found (convert needs the model's tokenizer)");
  const std::string text = read_text_file(tj_path);
  const tok::TokenizerJsonDoc doc = tok::read_tokenizer_json(text, tj_path);
  const Tokenizer tk = Tokenizer::from_folder(dir);  // validates everything and resolves the specials
  const nlohmann::json& tree = doc.tree;
  // The Split regex and the normalizer decide which pre-tokenizer name llama.cpp must use.
  std::string regex;
  std::function<void(const nlohmann::json&)> find_regex = [&](const nlohmann::json& p) {
    if (!p.is_object()) return;
    if (p.value("type", "") == "Split" && p.contains("pattern") && p["pattern"].contains("Regex"))
      regex = p["pattern"]["Regex"].get<std::string>();
    if (p.contains("pretokenizers") && p["pretokenizers"].is_array())
      for (const auto& x : p["pretokenizers"]) find_regex(x);
  };
  if (tree.contains("pre_tokenizer")) find_regex(tree["pre_tokenizer"]);
  bool nfc = false;
  if (tree.contains("normalizer") && tree["normalizer"].is_object()) {
    const auto& n = tree["normalizer"];
    const std::string t = n.value("type", "");
    if (t == "NFC") nfc = true;
    else if (t == "Sequence" && n.contains("normalizers") && n["normalizers"].size() == 1 &&
             n["normalizers"][0].value("type", "") == "NFC")
      nfc = true;
    else
      throw file_error(tj_path, "normalizer '" + t + "' has no GGUF equivalent");
  }
  const std::string pre = vocab_pre_name(regex, nfc);
  if (pre.empty())
    throw file_error(tj_path, "its pre-tokenizer is neither Qwen2's nor Llama 3's: no llama.cpp pre-tokenizer name fits");

  const int64_t V = c.vocab;
  std::vector<std::string> tokens(static_cast<size_t>(V));
  std::vector<int32_t> types(static_cast<size_t>(V), int32_t(VocabTokenType::Unused));
  std::vector<bool> set(static_cast<size_t>(V), false);
  auto place = [&](int64_t id, const std::string& t, VocabTokenType ty) {
    if (id < 0 || id >= V)
      throw file_error(tj_path, "token id " + std::to_string(id) + " is outside the embedding (" + std::to_string(V) + " rows)");
    tokens[size_t(id)] = t;
    types[size_t(id)] = int32_t(ty);
    set[size_t(id)] = true;
  };
  for (const auto& [t, id] : doc.vocab) place(id, t, VocabTokenType::Normal);
  if (tree.contains("added_tokens") && tree["added_tokens"].is_array())
    for (const auto& a : tree["added_tokens"])
      place(a.at("id").get<int64_t>(), a.at("content").get<std::string>(),
            a.value("special", false) ? VocabTokenType::Control : VocabTokenType::UserDefined);
  for (int64_t i = 0; i < V; ++i)
    if (!set[size_t(i)]) tokens[size_t(i)] = "[PAD" + std::to_string(i) + "]";
  std::vector<GgufValue> tv, ty, mv;
  tv.reserve(size_t(V));
  for (auto& t : tokens) tv.push_back(GgufValue::str(t));
  for (int32_t t : types) ty.push_back(GgufValue::i32(t));
  for (const auto& [l, r] : doc.merges) mv.push_back(GgufValue::str(l + " " + r));
  w.add("tokenizer.ggml.model", GgufValue::str("gpt2"));
  w.add("tokenizer.ggml.pre", GgufValue::str(pre));
  w.add("tokenizer.ggml.tokens", GgufValue::array(GgufValueType::STRING, std::move(tv)));
  w.add("tokenizer.ggml.token_type", GgufValue::array(GgufValueType::I32, std::move(ty)));
  w.add("tokenizer.ggml.merges", GgufValue::array(GgufValueType::STRING, std::move(mv)));
  const SpecialTokens& sp = tk.special();
  // The model's own end-of-sequence (generation_config) first: it is what generation stops on.
  std::vector<int32_t> eos(c.eos_ids.begin(), c.eos_ids.end());
  for (int32_t e : sp.eos)
    if (std::find(eos.begin(), eos.end(), e) == eos.end()) eos.push_back(e);
  if (!eos.empty()) w.add("tokenizer.ggml.eos_token_id", GgufValue::u32(uint32_t(eos[0])));
  if (eos.size() > 1) w.add("tokenizer.ggml.eot_token_id", GgufValue::u32(uint32_t(eos[1])));
  const std::optional<int32_t> bos = sp.bos ? sp.bos : c.bos_id >= 0 ? std::optional<int32_t>(c.bos_id) : std::nullopt;
  if (bos) w.add("tokenizer.ggml.bos_token_id", GgufValue::u32(uint32_t(*bos)));
  if (sp.pad) w.add("tokenizer.ggml.padding_token_id", GgufValue::u32(uint32_t(*sp.pad)));
  w.add("tokenizer.ggml.add_bos_token", GgufValue::boolean(sp.add_bos));
  if (!tk.chat_template().empty()) w.add("tokenizer.chat_template", GgufValue::str(tk.chat_template()));
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
  w.add("general.file_type", GgufValue::u32(file_type_of(type)));
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
  add_tokenizer(w, tokenizer_dir, c);

  auto mat = [&](const std::string& gguf, const std::string& hf, int64_t rows, int64_t cols, WType t, int64_t pm) {
    const WeightMatrix m = src.matrix(hf, rows, cols, t);
    w.add_tensor(gguf, {cols, rows}, ggml_of(t), matrix_bytes(m, pm));
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
  const ModelConfig c = ModelConfig::from_folder(dir);
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
