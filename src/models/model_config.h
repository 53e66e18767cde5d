#pragma once
// The shape and numerics of a target model, whatever its family (each family reads it: models/dense/dense_config.h),
// and the pieces of config.json reading that every family shares.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace dflash {

struct ArchSpec;

struct RopeScaling {
  std::string type = "default";  // default | linear | llama3 | yarn
  double factor = 1.0;
  double low_freq_factor = 1.0, high_freq_factor = 4.0;  // llama3
  double original_max_position = 0;                      // llama3, yarn
  double beta_fast = 32.0, beta_slow = 1.0;              // yarn
  double attention_factor = 1.0;                         // yarn: multiplies cos and sin
  bool truncate = true;                                  // yarn
};

// What a layer's token mixer is. Every layer of the dense family is Attention; the Qwen3.5
// hybrids interleave LinearAttention (Gated DeltaNet, a recurrent state) with Attention.
enum class LayerKind { Attention, LinearAttention };
const char* layer_kind_name(LayerKind k);

struct ModelConfig {
  const ArchSpec* arch = nullptr;
  std::string architecture;  // as named in config.json
  std::vector<LayerKind> layer_kinds;  // one per layer, filled by the config readers
  int hidden = 0, n_layers = 0, n_heads = 0, n_kv_heads = 0, head_dim = 0, ffn = 0, vocab = 0;
  double rms_eps = 1e-6;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  int max_position = 4096;
  bool tie_embeddings = false;
  bool qkv_bias = false;  // biases on the q/k/v projections (Qwen2; config attention_bias)
  std::vector<int> eos_ids;
  int bos_id = -1;
  // Qwen3.5 hybrids (models/qwen35): RoPE rotates the first rope_dims dims of a head (0: all),
  // and the linear-attention (Gated DeltaNet) layers have this shape.
  int rope_dims = 0;
  struct LinearAttention {
    int key_heads = 0, value_heads = 0, key_dim = 0, value_dim = 0, conv_kernel = 0;
    int channels() const { return 2 * key_heads * key_dim + value_heads * value_dim; }  // q|k|v
  } linear;
  // Filled by a family's config reader (models/dense/dense_config.h).
};

// Pieces of config.json reading that every family shares: a positive integer key (throws
// naming `origin`), a number with a default, token ids (one or a list), the layer kinds
// (layer_types; absent: every layer attention).
int config_int(const nlohmann::json& j, const char* key, const std::string& origin);
double config_num(const nlohmann::json& j, const char* key, double dflt);
void read_token_ids(const nlohmann::json& v, std::vector<int>& out);
// generation_config.json's eos ids, when the folder has one with eos_token_id, replace c's.
void read_generation_eos(const std::string& dir, ModelConfig& c);
std::vector<LayerKind> read_layer_kinds(const nlohmann::json& j, int n_layers, const std::string& origin);

// The rope_scaling object of a config (absent: no scaling).
RopeScaling parse_rope_scaling(const nlohmann::json& config, int max_pos, const std::string& origin);

// RoPE inverse frequencies for head_dim/2 pairs, with the config's scaling applied.
std::vector<double> rope_inv_freq(const ModelConfig& c);

}  // namespace dflash
