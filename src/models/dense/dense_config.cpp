// The dense family's config readers: a Hugging Face config.json (with generation_config.json's
// eos ids) and a GGUF file's <arch>.* metadata, both into a ModelConfig.
#include "models/dense/dense_config.h"

#include <cmath>

#include "formats/json_file.h"
#include "models/dense/arch_spec.h"
#include "models/dense/dense_tensors.h"
#include "models/gguf_tokenizer.h"
#include "util/error.h"
#include "util/mapped_file.h"

namespace dflash {

ModelConfig dense_config_from_json(const nlohmann::json& root, const std::string& origin) {
  if (!root.is_object()) throw file_error(origin, "config must be a JSON object");
  ModelConfig c;
  std::string arch_name;
  if (root.contains("architectures") && root["architectures"].is_array() && !root["architectures"].empty() &&
      root["architectures"][0].is_string())
    arch_name = root["architectures"][0].get<std::string>();
  c.architecture = arch_name;
  // Multimodal checkpoints nest the language model's config under text_config.
  const nlohmann::json& j = root.contains("text_config") && root["text_config"].is_object() ? root["text_config"] : root;
  c.arch = find_arch_by_hf_name(arch_name);
  if (!c.arch && &j != &root && j.contains("model_type") && j["model_type"].is_string())
    c.arch = find_arch_by_model_type(j["model_type"].get<std::string>());
  // The hybrid family's names too: target_families.cpp sends their configs elsewhere before
  // this reader, but a user reading this message wants the whole list.
  if (!c.arch)
    throw file_error(origin, "unknown architecture '" + (arch_name.empty() ? std::string("(none)") : arch_name) +
                                 "' (supported: " + supported_arch_names() +
                                 ", Qwen3_5ForConditionalGeneration, Qwen3_5ForCausalLM, Qwen3NextForCausalLM)");
  c.hidden = config_int(j, "hidden_size", origin);
  c.n_layers = config_int(j, "num_hidden_layers", origin);
  c.n_heads = config_int(j, "num_attention_heads", origin);
  c.n_kv_heads = j.contains("num_key_value_heads") && !j["num_key_value_heads"].is_null()
                     ? config_int(j, "num_key_value_heads", origin) : c.n_heads;
  c.head_dim = j.contains("head_dim") && !j["head_dim"].is_null() ? config_int(j, "head_dim", origin) : c.hidden / c.n_heads;
  c.ffn = config_int(j, "intermediate_size", origin);
  c.vocab = config_int(j, "vocab_size", origin);
  if (c.n_heads % c.n_kv_heads != 0)
    throw file_error(origin, "num_attention_heads must be a multiple of num_key_value_heads");
  if (c.head_dim % 2 != 0) throw file_error(origin, "head_dim must be even for RoPE");
  c.rms_eps = config_num(j, "rms_norm_eps", 1e-6);
  c.rope_theta = config_num(j, "rope_theta", 10000.0);
  if (j.contains("rope_parameters") && j["rope_parameters"].is_object())
    c.rope_theta = config_num(j["rope_parameters"], "rope_theta", c.rope_theta);
  c.max_position = j.contains("max_position_embeddings") && j["max_position_embeddings"].is_number_integer()
                       ? j["max_position_embeddings"].get<int>() : 4096;
  c.rope_scaling = parse_rope_scaling(j, c.max_position, origin);
  c.tie_embeddings = root.value("tie_word_embeddings", j.value("tie_word_embeddings", false));
  c.qkv_bias = c.arch->qkv_bias || j.value("attention_bias", false);
  c.layer_kinds = read_layer_kinds(j, c.n_layers, origin);
  if (j.contains("eos_token_id")) read_token_ids(j["eos_token_id"], c.eos_ids);
  if (j.contains("bos_token_id") && j["bos_token_id"].is_number_integer()) c.bos_id = j["bos_token_id"].get<int>();
  return c;
}

ModelConfig dense_config_from_folder(const std::string& dir) {
  const std::string path = dir + "/config.json";
  ModelConfig c = dense_config_from_json(read_json_file(path), path);
  read_generation_eos(dir, c);
  return c;
}

namespace {

int need_int(const GgufFile& f, const std::string& key) {
  auto v = f.get_int(key);
  if (!v) throw file_error(f.path(), "missing metadata key '" + key + "'");
  if (*v <= 0 || *v > (1 << 24)) throw file_error(f.path(), "metadata key '" + key + "' must be a positive integer");
  return int(*v);
}


}  // namespace

ModelConfig dense_config_from_gguf(const GgufFile& f) {
  const auto arch = f.get_string("general.architecture");
  if (!arch) throw file_error(f.path(), "missing metadata key 'general.architecture'");
  ModelConfig c;
  c.arch = find_arch_by_model_type(*arch);
  if (!c.arch)
    throw file_error(f.path(), "unknown architecture '" + *arch + "' (supported from GGUF: qwen3, qwen2, llama, qwen35)");
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

}  // namespace dflash
