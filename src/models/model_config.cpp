#include "models/model_config.h"

#include <cmath>

#include "formats/json_file.h"
#include "util/error.h"
#include "util/mapped_file.h"

namespace dflash {

int config_int(const nlohmann::json& j, const char* key, const std::string& origin) {
  if (!j.contains(key)) throw file_error(origin, std::string("missing config key '") + key + "'");
  if (!j[key].is_number_integer() || j[key].get<int64_t>() <= 0 || j[key].get<int64_t>() > (1 << 24))
    throw file_error(origin, std::string("config key '") + key + "' must be a positive integer");
  return j[key].get<int>();
}

double config_num(const nlohmann::json& j, const char* key, double dflt) {
  return j.contains(key) && j[key].is_number() ? j[key].get<double>() : dflt;
}

void read_token_ids(const nlohmann::json& v, std::vector<int>& out) {
  if (v.is_number_integer()) out.push_back(v.get<int>());
  if (v.is_array())
    for (auto& e : v)
      if (e.is_number_integer()) out.push_back(e.get<int>());
}

RopeScaling parse_rope_scaling(const nlohmann::json& j, int max_pos, const std::string& origin) {
  RopeScaling r;
  if (!j.contains("rope_scaling") || j["rope_scaling"].is_null()) return r;
  const auto& s = j["rope_scaling"];
  if (!s.is_object()) throw file_error(origin, "rope_scaling must be an object");
  r.type = s.value("rope_type", s.value("type", std::string("default")));
  r.factor = config_num(s, "factor", 1.0);
  if (r.type == "default" || r.type == "linear") return r;
  if (r.type == "llama3") {
    r.low_freq_factor = config_num(s, "low_freq_factor", 1.0);
    r.high_freq_factor = config_num(s, "high_freq_factor", 4.0);
    r.original_max_position = config_num(s, "original_max_position_embeddings", 8192);
    return r;
  }
  if (r.type == "yarn") {
    r.original_max_position = config_num(s, "original_max_position_embeddings", max_pos);
    r.beta_fast = config_num(s, "beta_fast", 32.0);
    r.beta_slow = config_num(s, "beta_slow", 1.0);
    r.truncate = s.value("truncate", true);
    auto mscale = [](double scale, double m) { return scale <= 1 ? 1.0 : 0.1 * m * std::log(scale) + 1.0; };
    if (s.contains("attention_factor") && s["attention_factor"].is_number()) {
      r.attention_factor = s["attention_factor"].get<double>();
    } else if (config_num(s, "mscale", 0) != 0 && config_num(s, "mscale_all_dim", 0) != 0) {
      r.attention_factor = mscale(r.factor, config_num(s, "mscale", 0)) / mscale(r.factor, config_num(s, "mscale_all_dim", 0));
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
void read_generation_eos(const std::string& dir, ModelConfig& c) {
  const std::string gen = dir + "/generation_config.json";
  if (!file_exists(gen)) return;
  const nlohmann::json g = read_json_file(gen);
  if (!g.contains("eos_token_id")) return;
  c.eos_ids.clear();
  read_token_ids(g["eos_token_id"], c.eos_ids);
}

std::vector<LayerKind> read_layer_kinds(const nlohmann::json& j, int n_layers, const std::string& origin) {
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
