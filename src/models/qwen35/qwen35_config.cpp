#include "models/qwen35/qwen35_config.h"

#include <cmath>

#include "formats/gguf.h"
#include "formats/json_file.h"
#include "kernels/gated_delta_rows.h"
#include "models/gguf_tokenizer.h"
#include "models/qwen35/qwen35_tensors.h"
#include "util/error.h"
#include "util/mapped_file.h"

namespace dflash {

namespace {

std::string first_architecture(const nlohmann::json& root) {
  if (root.contains("architectures") && root["architectures"].is_array() && !root["architectures"].empty() &&
      root["architectures"][0].is_string())
    return root["architectures"][0].get<std::string>();
  return "";
}

std::string model_type(const nlohmann::json& j) {
  return j.contains("model_type") && j["model_type"].is_string() ? j["model_type"].get<std::string>() : "";
}

int optional_int(const nlohmann::json& j, const char* key, int dflt, const std::string& origin) {
  if (!j.contains(key) || j[key].is_null()) return dflt;
  return config_int(j, key, origin);
}

// What the forward needs of the linear layers' shape, whichever file it came from (the key
// names say which of the file's keys to blame).
void check_linear_shape(const ModelConfig& c, const std::string& origin, const char* value_heads_key,
                        const char* key_heads_key) {
  const auto& L = c.linear;
  if (L.key_heads <= 0 || L.value_heads % L.key_heads != 0)
    throw file_error(origin, std::string(value_heads_key) + " (" + std::to_string(L.value_heads) + ") must be a multiple of " +
                                 key_heads_key + " (" + std::to_string(L.key_heads) + ")");
  for (int d : {L.key_dim, L.value_dim, c.head_dim})
    if (d > gdn::kMaxHeadDim)
      throw file_error(origin, "a head dim of " + std::to_string(d) + " is over the supported " +
                                   std::to_string(gdn::kMaxHeadDim));
}

// Qwen3-Next (§1.3) is this family's forward with a dense MLP; its published checkpoints are
// mixture-of-experts, which the forward does not have. Hugging Face's rule: layer l uses experts
// iff l is not in mlp_only_layers, num_experts > 0 and (l + 1) % decoder_sparse_step == 0, with
// the defaults num_experts 512, decoder_sparse_step 1, mlp_only_layers [] (Qwen3NextConfig), so
// a config that leaves num_experts out asks for experts; a dense one says num_experts 0 (or lists
// every layer in mlp_only_layers).
void refuse_qwen3_next_moe(const nlohmann::json& j, int n_layers, const std::string& origin) {
  auto int_key = [&](const char* key, int64_t dflt) {
    if (!j.contains(key) || j[key].is_null()) return dflt;
    if (!j[key].is_number_integer()) throw file_error(origin, std::string("config key '") + key + "' must be an integer");
    return j[key].get<int64_t>();
  };
  const int64_t experts = int_key("num_experts", 512);
  if (experts <= 0) return;
  const int64_t step = int_key("decoder_sparse_step", 1);
  std::vector<bool> dense_only(size_t(n_layers), false);
  if (j.contains("mlp_only_layers") && j["mlp_only_layers"].is_array())
    for (const auto& e : j["mlp_only_layers"])
      if (e.is_number_integer() && e.get<int64_t>() >= 0 && e.get<int64_t>() < n_layers)
        dense_only[size_t(e.get<int64_t>())] = true;
  for (int l = 0; l < n_layers; ++l) {
    if (dense_only[size_t(l)] || (step > 0 && (l + 1) % step != 0)) continue;
    throw file_error(origin, "mixture-of-experts Qwen3-Next is not supported (num_experts " +
                                 std::string(j.contains("num_experts") ? "" : "absent, Hugging Face's default ") +
                                 std::to_string(experts) + "; layer " + std::to_string(l) +
                                 " would use experts): only the dense form loads (num_experts 0)");
  }
}

}  // namespace

bool is_qwen35_config(const nlohmann::json& root) {
  if (!root.is_object()) return false;
  const std::string a = first_architecture(root);
  if (a == "Qwen3_5ForConditionalGeneration" || a == "Qwen3_5ForCausalLM" || a == "Qwen3NextForCausalLM") return true;
  const std::string t = model_type(root);
  return t == "qwen3_5" || t == "qwen3_5_text" || t == "qwen3_next";
}

ModelConfig qwen35_config_from_json(const nlohmann::json& root, const std::string& origin) {
  if (!root.is_object()) throw file_error(origin, "config must be a JSON object");
  ModelConfig c;
  c.architecture = first_architecture(root);
  const std::string type = model_type(root);
  if (c.architecture.empty())
    c.architecture = type == "qwen3_5" ? "Qwen3_5ForConditionalGeneration"
                     : type == "qwen3_next" ? "Qwen3NextForCausalLM" : "Qwen3_5ForCausalLM";
  const bool next = c.architecture == "Qwen3NextForCausalLM" || type == "qwen3_next";
  // The multimodal form keeps the language model's keys in text_config (§1.1).
  const bool nested = root.contains("text_config") && root["text_config"].is_object();
  const nlohmann::json& j = nested ? root["text_config"] : root;
  c.hidden = config_int(j, "hidden_size", origin);
  c.n_layers = config_int(j, "num_hidden_layers", origin);
  if (next) refuse_qwen3_next_moe(j, c.n_layers, origin);
  c.n_heads = config_int(j, "num_attention_heads", origin);
  c.n_kv_heads = optional_int(j, "num_key_value_heads", c.n_heads, origin);
  c.head_dim = optional_int(j, "head_dim", 256, origin);
  c.ffn = config_int(j, "intermediate_size", origin);
  c.vocab = config_int(j, "vocab_size", origin);
  if (c.n_heads % c.n_kv_heads != 0)
    throw file_error(origin, "num_attention_heads must be a multiple of num_key_value_heads");
  c.rms_eps = config_num(j, "rms_norm_eps", 1e-6);
  c.max_position = optional_int(j, "max_position_embeddings", 262144, origin);
  c.tie_embeddings = root.value("tie_word_embeddings", j.value("tie_word_embeddings", false));
  if (j.value("attention_bias", false)) throw file_error(origin, "attention_bias true: Qwen3.5 layers have no biases");

  // RoPE: rope_parameters (newer configs) or top-level keys (§1.2); text positions make the
  // mRoPE sections plain NeoX RoPE on the first rope_dims dims (§3.3).
  const nlohmann::json empty = nlohmann::json::object();
  const nlohmann::json& rp = j.contains("rope_parameters") && j["rope_parameters"].is_object() ? j["rope_parameters"] : empty;
  const std::string rope_type = rp.value("rope_type", j.contains("rope_scaling") && j["rope_scaling"].is_object()
                                                           ? j["rope_scaling"].value("rope_type", std::string("default"))
                                                           : std::string("default"));
  if (rope_type != "default")
    throw file_error(origin, "rope_type '" + rope_type + "' is not supported for Qwen3.5 (supported: default)");
  c.rope_theta = config_num(rp, "rope_theta", config_num(j, "rope_theta", 1e7));
  const double prf = config_num(rp, "partial_rotary_factor", config_num(j, "partial_rotary_factor", 0.25));
  c.rope_dims = int(double(c.head_dim) * prf);
  if (c.rope_dims < 2 || c.rope_dims > c.head_dim || c.rope_dims % 2 != 0)
    throw file_error(origin, "partial_rotary_factor " + std::to_string(prf) + " gives " + std::to_string(c.rope_dims) +
                                 " rotated dims of head_dim " + std::to_string(c.head_dim) + " (need an even count >= 2)");

  auto& L = c.linear;
  L.key_heads = config_int(j, "linear_num_key_heads", origin);
  L.value_heads = config_int(j, "linear_num_value_heads", origin);
  L.key_dim = config_int(j, "linear_key_head_dim", origin);
  L.value_dim = config_int(j, "linear_value_head_dim", origin);
  L.conv_kernel = optional_int(j, "linear_conv_kernel_dim", 4, origin);
  check_linear_shape(c, origin, "linear_num_value_heads", "linear_num_key_heads");

  // layer_types when present, else full attention every full_attention_interval layers (§1.2).
  if (j.contains("layer_types") && !j["layer_types"].is_null()) {
    c.layer_kinds = read_layer_kinds(j, c.n_layers, origin);
  } else {
    const int every = optional_int(j, "full_attention_interval", 4, origin);
    for (int l = 0; l < c.n_layers; ++l)
      c.layer_kinds.push_back((l + 1) % every == 0 ? LayerKind::Attention : LayerKind::LinearAttention);
  }
  if (j.contains("eos_token_id")) read_token_ids(j["eos_token_id"], c.eos_ids);
  if (j.contains("bos_token_id") && j["bos_token_id"].is_number_integer()) c.bos_id = j["bos_token_id"].get<int>();
  return c;
}

ModelConfig qwen35_config_from_folder(const std::string& dir) {
  const std::string path = dir + "/config.json";
  ModelConfig c = qwen35_config_from_json(read_json_file(path), path);
  read_generation_eos(dir, c);
  return c;
}

namespace {

int gguf_positive(const GgufFile& f, const std::string& key, std::optional<int> dflt = std::nullopt) {
  const auto v = f.get_int(key);
  if (!v) {
    if (dflt) return *dflt;
    throw file_error(f.path(), "missing metadata key '" + key + "'");
  }
  if (*v <= 0 || *v > (1 << 24)) throw file_error(f.path(), "metadata key '" + key + "' must be a positive integer");
  return int(*v);
}

}  // namespace

// llama.cpp's qwen35 metadata (its converter's set_gguf_parameters, its loader's
// load_arch_hparams): the dense keys, ssm.* for the linear layers, the layer pattern.
ModelConfig qwen35_config_from_gguf(const GgufFile& f) {
  const std::string& origin = f.path();
  const auto arch = f.get_string("general.architecture");
  if (arch != "qwen35") throw file_error(origin, "general.architecture is not 'qwen35'");
  const std::string a = "qwen35.";
  ModelConfig c;
  c.architecture = "Qwen3_5ForCausalLM";
  c.hidden = gguf_positive(f, a + "embedding_length");
  // block_count also counts the MTP blocks appended after the trunk (nextn_predict_layers).
  const int blocks = gguf_positive(f, a + "block_count");
  const int mtp = int(f.get_int(a + "nextn_predict_layers").value_or(0));
  if (mtp < 0 || mtp >= blocks) throw file_error(origin, "metadata key '" + a + "nextn_predict_layers' is out of range");
  c.n_layers = blocks - mtp;
  c.n_heads = gguf_positive(f, a + "attention.head_count");
  c.n_kv_heads = gguf_positive(f, a + "attention.head_count_kv", c.n_heads);
  c.head_dim = gguf_positive(f, a + "attention.key_length", c.hidden / c.n_heads);
  if (gguf_positive(f, a + "attention.value_length", c.head_dim) != c.head_dim)
    throw file_error(origin, "attention.value_length differs from attention.key_length (not supported)");
  if (c.n_heads % c.n_kv_heads != 0)
    throw file_error(origin, "attention.head_count must be a multiple of attention.head_count_kv");
  c.ffn = gguf_positive(f, a + "feed_forward_length");
  c.rms_eps = f.get_float(a + "attention.layer_norm_rms_epsilon").value_or(1e-6);
  c.rope_theta = f.get_float(a + "rope.freq_base").value_or(10000.0);
  c.max_position = gguf_positive(f, a + "context_length", 262144);
  c.rope_dims = gguf_positive(f, a + "rope.dimension_count", c.head_dim);
  if (c.rope_dims < 2 || c.rope_dims > c.head_dim || c.rope_dims % 2 != 0)
    throw file_error(origin, "rope.dimension_count " + std::to_string(c.rope_dims) + " for key_length " +
                                 std::to_string(c.head_dim) + " (need an even count >= 2, at most key_length)");

  auto& L = c.linear;
  L.conv_kernel = gguf_positive(f, a + "ssm.conv_kernel");
  L.key_dim = gguf_positive(f, a + "ssm.state_size");
  L.key_heads = gguf_positive(f, a + "ssm.group_count");
  L.value_heads = gguf_positive(f, a + "ssm.time_step_rank");
  const int inner = gguf_positive(f, a + "ssm.inner_size");
  if (inner % L.value_heads != 0)
    throw file_error(origin, "ssm.inner_size (" + std::to_string(inner) + ") is not a multiple of ssm.time_step_rank (" +
                                 std::to_string(L.value_heads) + ")");
  L.value_dim = inner / L.value_heads;
  check_linear_shape(c, origin, "ssm.time_step_rank", "ssm.group_count");

  // Per-layer flags when the pattern is given, else full attention every interval layers.
  if (const GgufValue* r = f.find(a + "attention.recurrent_layers")) {
    if (r->type != GgufValueType::ARRAY || r->items.size() < size_t(c.n_layers) ||
        (!r->items.empty() && !r->items[0].is_int() && r->items[0].type != GgufValueType::BOOL))
      throw file_error(origin, "metadata key '" + a + "attention.recurrent_layers' must be an array of " +
                                   std::to_string(blocks) + " flags");
    for (int l = 0; l < c.n_layers; ++l)
      c.layer_kinds.push_back(r->items[size_t(l)].u ? LayerKind::LinearAttention : LayerKind::Attention);
  } else {
    const int every = gguf_positive(f, a + "full_attention_interval", 4);
    for (int l = 0; l < c.n_layers; ++l)
      c.layer_kinds.push_back((l + 1) % every == 0 ? LayerKind::Attention : LayerKind::LinearAttention);
  }

  const TensorNaming naming = gguf_tensor_naming();
  const std::string emb_name = tensor_name(qwen35_tensor(Qwen35Role::Embed), naming);
  const GgufTensor* emb = f.tensor(emb_name);
  if (!emb) throw file_error(origin, "missing tensor '" + emb_name + "'");
  if (emb->ne.size() < 2 || emb->ne[1] > (1 << 24)) throw file_error(origin, "tensor '" + emb_name + "' is not a matrix");
  c.vocab = int(emb->ne[1]);
  c.tie_embeddings = f.tensor(tensor_name(qwen35_tensor(Qwen35Role::LmHead), naming)) == nullptr;
  if (auto e = gguf_token_id(f, "tokenizer.ggml.eos_token_id")) c.eos_ids.push_back(*e);
  if (auto e = gguf_token_id(f, "tokenizer.ggml.eot_token_id"); e && (c.eos_ids.empty() || c.eos_ids[0] != *e))
    c.eos_ids.push_back(*e);
  if (auto b = gguf_token_id(f, "tokenizer.ggml.bos_token_id")) c.bos_id = *b;
  return c;
}

std::vector<double> qwen35_inv_freq(const ModelConfig& c) {
  const int R = c.rope_dims > 0 ? c.rope_dims : c.head_dim;
  std::vector<double> inv(size_t(R / 2));
  for (int i = 0; i < R / 2; ++i)
    inv[size_t(i)] = double(1.0f / std::pow(float(c.rope_theta), float(2 * i) / float(R)));
  return inv;
}

}  // namespace dflash
