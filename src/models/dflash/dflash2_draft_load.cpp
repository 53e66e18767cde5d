// Reading a DFlash2DraftModel folder: the v1 keys and tensors, then the convolutions, the
// candidate selector and the attention layout, each checked against the config.
#include <cmath>

#include "formats/safetensors.h"
#include "kernels/numeric.h"
#include "models/dflash/dflash2_draft.h"
#include "models/dflash/dflash2_tensors.h"
#include "util/error.h"

namespace dflash {

namespace {

int dflash2_int(const nlohmann::json& j, const char* k, int def, int lo, int hi, const std::string& origin) {
  const nlohmann::json* v = dflash_key(j, k);
  if (!v || v->is_null()) return def;
  if (!v->is_number_integer() || v->get<int64_t>() < lo || v->get<int64_t>() > hi)
    throw file_error(origin, std::string("config key '") + k + "' must be an integer in " + std::to_string(lo) + ".." +
                                 std::to_string(hi));
  return v->get<int>();
}

float dflash2_float(const nlohmann::json& j, const char* k, float def, const std::string& origin) {
  const nlohmann::json* v = dflash_key(j, k);
  if (!v || v->is_null()) return def;
  if (!v->is_number() || !std::isfinite(v->get<double>()))
    throw file_error(origin, std::string("config key '") + k + "' must be a finite number");
  return v->get<float>();
}

// A small tensor of any stored float dtype, as fp32.
std::vector<float> read_floats(const TensorView& t) {
  std::vector<float> out(size_t(t.numel()));
  for (size_t i = 0; i < out.size(); ++i) {
    const uint8_t* p = t.data + i * dtype_size(t.dtype);
    if (t.dtype == DType::F32) {
      std::memcpy(&out[i], p, 4);
    } else {
      uint16_t h;
      std::memcpy(&h, p, 2);
      out[i] = t.dtype == DType::BF16 ? bf16_to_f32(h) : f16_to_f32(h);
    }
  }
  return out;
}

}  // namespace

std::unique_ptr<DFlash2Draft> DFlash2Draft::load(const std::string& dir, const nlohmann::json& j,
                                                  const LoadOptions& opt, const TargetModel& target) {
  const std::string cfg_path = dir + "/config.json";
  auto d = std::make_unique<DFlash2Draft>();
  d->cfg_ = DraftConfig::from_json(j, cfg_path, target.config().n_layers, "DFlash2DraftModel");
  DraftConfig& c = d->cfg_;
  DFlash2Config& c2 = d->cfg2_;
  const int V = target.config().vocab;
  c2.conv_kernel = dflash2_int(j, "conv_kernel_size", 2, 1, 64, cfg_path);
  c2.conv_group = dflash2_int(j, "conv_group_size", 16, 1, 1 << 20, cfg_path);
  c2.selector_rank = dflash2_int(j, "selector_rank", 256, 1, 1 << 16, cfg_path);
  c2.selector_top_k = dflash2_int(j, "selector_top_k", 16, 1, 1 << 24, cfg_path);
  c2.output_multiplier = dflash2_float(j, "output_multiplier", 1.0f, cfg_path);
  c2.softcap = dflash2_float(j, "final_logit_softcapping", 0.0f, cfg_path);
  c.embed_scale = dflash2_float(j, "input_embedding_scale", 1.0f, cfg_path);
  if (c2.softcap < 0) throw file_error(cfg_path, "final_logit_softcapping must be positive (or null for none)");
  if (c.hidden % c2.conv_group != 0)
    throw file_error(cfg_path, "hidden_size " + std::to_string(c.hidden) + " is not a multiple of conv_group_size " +
                                   std::to_string(c2.conv_group));
  if (c2.selector_top_k > V)
    throw file_error(cfg_path, "selector_top_k " + std::to_string(c2.selector_top_k) +
                                   " is larger than the target's vocabulary (" + std::to_string(V) + ")");

  // Attention layout: layer_types (full_attention | sliding_attention) with sliding_window;
  // is_causal for all layers, or, when absent, causal exactly on the sliding layers (the
  // reference's default).
  c.window.assign(size_t(c.n_layers), 0);
  c.causal.assign(size_t(c.n_layers), 0);
  const nlohmann::json* causal_key = j.contains("is_causal") ? &j["is_causal"] : dflash_key(j, "is_causal");
  if (!causal_key) causal_key = dflash_key(j, "causal");
  if (causal_key && !causal_key->is_null() && !causal_key->is_boolean())
    throw file_error(cfg_path, "is_causal must be true or false");
  const bool has_causal = causal_key && causal_key->is_boolean();
  if (j.contains("layer_types") && !j["layer_types"].is_null()) {
    const auto& lt = j["layer_types"];
    if (!lt.is_array() || int(lt.size()) != c.n_layers)
      throw file_error(cfg_path, "layer_types must list one type per layer (" + std::to_string(c.n_layers) + ")");
    for (int l = 0; l < c.n_layers; ++l) {
      const std::string t = lt[size_t(l)].is_string() ? lt[size_t(l)].get<std::string>() : "";
      if (t == "sliding_attention") {
        if (!j.contains("sliding_window") || !j["sliding_window"].is_number_integer() ||
            j["sliding_window"].get<int64_t>() < 1 || j["sliding_window"].get<int64_t>() > (1 << 30))
          throw file_error(cfg_path, "sliding_attention layers need a positive integer sliding_window");
        c.window[size_t(l)] = j["sliding_window"].get<int>();
        c.causal[size_t(l)] = 1;
      } else if (t != "full_attention") {
        throw file_error(cfg_path, "unknown layer type '" + t + "' (expected full_attention or sliding_attention)");
      }
    }
  }
  if (has_causal) c.causal.assign(size_t(c.n_layers), causal_key->get<bool>() ? 1 : 0);

  WeightLoader L = d->load_common(dir, cfg_path, opt, target);
  const auto names = d->store_names();
  bool any_v2 = false;
  for (const auto& n : names) any_v2 |= is_dflash2_tensor_name(n);
  if (!any_v2)
    throw file_error(dir, "the checkpoint mixes DFlash2 and DFlash (v1) parts: a DFlash2DraftModel config over "
                          "weights without attention_conv, mlp_conv or candidate_selector tensors");
  const TensorDims dims = dflash2_dims(c, c2, V);
  const TensorNaming naming = hf_tensor_naming(d->prefix_);
  using R = DFlash2Role;
  for (int l = 0; l < c.n_layers; ++l)  // convs_[layer * 2 + sub]: the attention's, then the MLP's
    for (const auto& [base, projection] : {std::pair{R::AttentionConvBase, R::AttentionConvProjection},
                                          std::pair{R::MlpConvBase, R::MlpConvProjection}}) {
      const TensorSpec<R>& b = dflash2_tensor(base);
      Conv cv;
      cv.base = read_floats(L.get(tensor_name(b, naming, l), tensor_shape(b, dims)));
      cv.projection = read_matrix(L, dflash2_tensor(projection), naming, dims, opt.weights, l);
      target.backend().prepare_weight(cv.projection);
      d->convs_.push_back(std::move(cv));
    }
  d->hidden_projection_ = read_matrix(L, dflash2_tensor(R::SelectorProjection), naming, dims, opt.weights);
  target.backend().prepare_weight(d->hidden_projection_);
  // Gathered: the codebooks stay in the mapped file, in its own dtype.
  d->predecessor_ = read_matrix(L, dflash2_tensor(R::PredecessorCodebook), naming, dims, opt.weights);
  d->successor_ = read_matrix(L, dflash2_tensor(R::SuccessorCodebook), naming, dims, opt.weights);
  return d;
}

}  // namespace dflash
