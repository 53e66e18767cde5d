#include "models/model_config.h"

#include <cmath>

#include "formats/json_file.h"
#include "models/dense/arch_spec.h"
#include "util/error.h"
#include "util/mapped_file.h"

namespace dflash {

namespace {

int get_int(const nlohmann::json& j, const char* key, const std::string& origin) {
  if (!j.contains(key)) throw file_error(origin, std::string("missing config key '") + key + "'");
  if (!j[key].is_number_integer() || j[key].get<int64_t>() <= 0 || j[key].get<int64_t>() > (1 << 24))
    throw file_error(origin, std::string("config key '") + key + "' must be a positive integer");
  return j[key].get<int>();
}

double get_num(const nlohmann::json& j, const char* key, double dflt) {
  return j.contains(key) && j[key].is_number() ? j[key].get<double>() : dflt;
}

void read_ids(const nlohmann::json& v, std::vector<int>& out) {
  if (v.is_number_integer()) out.push_back(v.get<int>());
  if (v.is_array())
    for (auto& e : v)
      if (e.is_number_integer()) out.push_back(e.get<int>());
}

}  // namespace

RopeScaling parse_rope_scaling(const nlohmann::json& j, int max_pos, const std::string& origin) {
  RopeScaling r;
  if (!j.contains("rope_scaling") || j["rope_scaling"].is_null()) return r;
  const auto& s = j["rope_scaling"];
  if (!s.is_object()) throw file_error(origin, "rope_scaling must be an object");
  r.type = s.value("rope_type", s.value("type", std::string("default")));
  r.factor = get_num(s, "factor", 1.0);
  if (r.type == "default" || r.type == "linear") return r;
  if (r.type == "llama3") {
    r.low_freq_factor = get_num(s, "low_freq_factor", 1.0);
    r.high_freq_factor = get_num(s, "high_freq_factor", 4.0);
    r.original_max_position = get_num(s, "original_max_position_embeddings", 8192);
    return r;
  }
  if (r.type == "yarn") {
    r.original_max_position = get_num(s, "original_max_position_embeddings", max_pos);
    r.beta_fast = get_num(s, "beta_fast", 32.0);
    r.beta_slow = get_num(s, "beta_slow", 1.0);
    r.truncate = s.value("truncate", true);
    auto mscale = [](double scale, double m) { return scale <= 1 ? 1.0 : 0.1 * m * std::log(scale) + 1.0; };
    if (s.contains("attention_factor") && s["attention_factor"].is_number()) {
      r.attention_factor = s["attention_factor"].get<double>();
    } else if (get_num(s, "mscale", 0) != 0 && get_num(s, "mscale_all_dim", 0) != 0) {
      r.attention_factor = mscale(r.factor, get_num(s, "mscale", 0)) / mscale(r.factor, get_num(s, "mscale_all_dim", 0));
    } else {
      r.attention_factor = mscale(r.factor, 1.0);
    }
    return r;
  }
  throw file_error(origin, "unsupported rope_scaling type '" + r.type + "' (supported: default, linear, llama3, yarn)");
}

const char* layer_kind_name(LayerKind k) {
  return k == LayerKind::LinearAttention ? "linear_attention" : "attention";
}

// config.json's layer_types (Qwen3.5: "linear_attention" / "full_attention"); absent: every
// layer is attention.
static std::vector<LayerKind> read_layer_kinds(const nlohmann::json& j, int n_layers, const std::string& origin) {
  std::vector<LayerKind> kinds(size_t(n_layers), LayerKind::Attention);
  if (!j.contains("layer_types") || j["layer_types"].is_null()) return kinds;
  const auto& t = j["layer_types"];
  if (!t.is_array() || t.size() != size_t(n_layers))
    throw file_error(origin, "layer_types must list one type per layer (" + std::to_string(n_layers) + ")");
  for (size_t l = 0; l < t.size(); ++l) {
    const std::string s = t[l].is_string() ? t[l].get<std::string>() : "";
    if (s == "linear_attention") kinds[l] = LayerKind::LinearAttention;
    else if (s != "full_attention" && s != "attention")
      throw file_error(origin, "layer_types[" + std::to_string(l) + "] is '" + s +
                                   "' (known: full_attention, linear_attention)");
  }
  return kinds;
}

ModelConfig ModelConfig::from_json(const nlohmann::json& root, const std::string& origin) {
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
  if (!c.arch)
    throw file_error(origin, "unknown architecture '" + (arch_name.empty() ? std::string("(none)") : arch_name) +
                                 "' (supported: " + supported_arch_names() + ")");
  c.hidden = get_int(j, "hidden_size", origin);
  c.n_layers = get_int(j, "num_hidden_layers", origin);
  c.n_heads = get_int(j, "num_attention_heads", origin);
  c.n_kv_heads = j.contains("num_key_value_heads") && !j["num_key_value_heads"].is_null()
                     ? get_int(j, "num_key_value_heads", origin) : c.n_heads;
  c.head_dim = j.contains("head_dim") && !j["head_dim"].is_null() ? get_int(j, "head_dim", origin) : c.hidden / c.n_heads;
  c.ffn = get_int(j, "intermediate_size", origin);
  c.vocab = get_int(j, "vocab_size", origin);
  if (c.n_heads % c.n_kv_heads != 0)
    throw file_error(origin, "num_attention_heads must be a multiple of num_key_value_heads");
  if (c.head_dim % 2 != 0) throw file_error(origin, "head_dim must be even for RoPE");
  c.rms_eps = get_num(j, "rms_norm_eps", 1e-6);
  c.rope_theta = get_num(j, "rope_theta", 10000.0);
  if (j.contains("rope_parameters") && j["rope_parameters"].is_object())
    c.rope_theta = get_num(j["rope_parameters"], "rope_theta", c.rope_theta);
  c.max_position = j.contains("max_position_embeddings") && j["max_position_embeddings"].is_number_integer()
                       ? j["max_position_embeddings"].get<int>() : 4096;
  c.rope_scaling = parse_rope_scaling(j, c.max_position, origin);
  c.tie_embeddings = root.value("tie_word_embeddings", j.value("tie_word_embeddings", false));
  c.qkv_bias = c.arch->qkv_bias || j.value("attention_bias", false);
  c.layer_kinds = read_layer_kinds(j, c.n_layers, origin);
  if (j.contains("eos_token_id")) read_ids(j["eos_token_id"], c.eos_ids);
  if (j.contains("bos_token_id") && j["bos_token_id"].is_number_integer()) c.bos_id = j["bos_token_id"].get<int>();
  return c;
}

ModelConfig ModelConfig::from_folder(const std::string& dir) {
  const std::string path = dir + "/config.json";
  ModelConfig c = from_json(read_json_file(path), path);
  const std::string gen = dir + "/generation_config.json";
  if (file_exists(gen)) {
    auto g = read_json_file(gen);
    if (g.contains("eos_token_id")) {
      c.eos_ids.clear();
      read_ids(g["eos_token_id"], c.eos_ids);
    }
  }
  return c;
}

std::vector<double> rope_inv_freq(const ModelConfig& c) {
  const int half = c.head_dim / 2;
  const double base = c.rope_theta;
  const double dim = c.head_dim;
  std::vector<double> inv(static_cast<size_t>(half));
  for (int i = 0; i < half; ++i) inv[size_t(i)] = 1.0 / std::pow(base, (2.0 * i) / dim);
  const RopeScaling& r = c.rope_scaling;
  if (r.type == "linear") {
    for (auto& f : inv) f /= r.factor;
  } else if (r.type == "llama3") {
    const double low_wl = r.original_max_position / r.low_freq_factor;
    const double high_wl = r.original_max_position / r.high_freq_factor;
    for (auto& f : inv) {
      const double wl = 2 * M_PI / f;
      if (wl > low_wl) {
        f = f / r.factor;
      } else if (wl >= high_wl) {
        const double smooth = (r.original_max_position / wl - r.low_freq_factor) / (r.high_freq_factor - r.low_freq_factor);
        f = (1 - smooth) * f / r.factor + smooth * f;
      }
    }
  } else if (r.type == "yarn") {
    auto corr_dim = [&](double rot) {
      return (dim * std::log(r.original_max_position / (rot * 2 * M_PI))) / (2 * std::log(base));
    };
    double low = corr_dim(r.beta_fast), high = corr_dim(r.beta_slow);
    if (r.truncate) {
      low = std::floor(low);
      high = std::ceil(high);
    }
    low = std::max(low, 0.0);
    high = std::min(high, dim - 1);
    if (low == high) high += 0.001;
    for (int i = 0; i < half; ++i) {
      const double ramp = std::clamp((i - low) / (high - low), 0.0, 1.0);
      const double extrap = 1 - ramp;  // 1 keeps the original frequency
      const double f = inv[size_t(i)];
      inv[size_t(i)] = (f / r.factor) * (1 - extrap) + f * extrap;
    }
  }
  return inv;
}

}  // namespace dflash
