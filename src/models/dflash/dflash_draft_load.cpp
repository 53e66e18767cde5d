// Reading a z-lab DFlash draft folder and checking that it fits its target.
#include <cmath>

#include "formats/gguf.h"
#include "formats/json_file.h"
#include "formats/safetensors.h"
#include "models/dflash/dflash2_draft.h"
#include "models/dflash/dflash_draft.h"
#include "models/dflash/dflash2_tensors.h"
#include "models/dflash/dflash_tensors.h"
#include "models/weight_loader.h"
#include "util/error.h"

namespace dflash {

std::vector<int> default_target_layer_ids(int n, int L) {
  if (L <= 1) return {n / 2};
  std::vector<int> ids;
  for (int i = 0; i < L; ++i) {
    const double v = 1.0 + double(i) * double(n - 4) / double(L - 1);
    ids.push_back(int(std::nearbyint(v)));  // default rounding mode: half to even, like Python
  }
  return ids;
}

namespace {

int need_int(const nlohmann::json& j, const char* k, const std::string& origin) {
  if (!j.contains(k) || !j[k].is_number_integer() || j[k].get<int64_t>() <= 0 || j[k].get<int64_t>() > (1 << 24))
    throw file_error(origin, std::string("missing or invalid config key '") + k + "'");
  return j[k].get<int>();
}

}  // namespace

const nlohmann::json* dflash_key(const nlohmann::json& j, const char* k) {
  if (j.contains("dflash_config") && j["dflash_config"].is_object() && j["dflash_config"].contains(k))
    return &j["dflash_config"][k];
  if (j.contains(k)) return &j[k];
  return nullptr;
}

std::string draft_architecture(const nlohmann::json& j) {
  return j.is_object() && j.contains("architectures") && j["architectures"].is_array() && !j["architectures"].empty() &&
                 j["architectures"][0].is_string()
             ? j["architectures"][0].get<std::string>() : "";
}

DraftConfig DraftConfig::from_json(const nlohmann::json& j, const std::string& origin, int target_layers,
                                   const std::string& architecture) {
  if (!j.is_object()) throw file_error(origin, "config must be a JSON object");
  const std::string arch = draft_architecture(j);
  if (arch != architecture)
    throw file_error(origin, "unknown draft architecture '" + arch + "' (expected DFlashDraftModel or DFlash2DraftModel)");
  if (arch == "DFlashDraftModel")
    for (const char* k : {"conv_kernel_size", "conv_group_size", "selector_rank", "selector_top_k"})
      if (dflash_key(j, k))
        throw file_error(origin, std::string("the config mixes DFlash (v1) and DFlash2 parts: a DFlashDraftModel with '") +
                                     k + "' (a DFlash2 key)");
  DraftConfig c;
  c.hidden = need_int(j, "hidden_size", origin);
  c.n_layers = need_int(j, "num_hidden_layers", origin);
  c.n_heads = need_int(j, "num_attention_heads", origin);
  c.n_kv_heads = j.contains("num_key_value_heads") ? need_int(j, "num_key_value_heads", origin) : c.n_heads;
  c.head_dim = j.contains("head_dim") && !j["head_dim"].is_null() ? need_int(j, "head_dim", origin) : c.hidden / c.n_heads;
  c.ffn = need_int(j, "intermediate_size", origin);
  c.vocab = j.contains("vocab_size") ? need_int(j, "vocab_size", origin) : 0;
  if (c.n_heads % c.n_kv_heads != 0) throw file_error(origin, "num_attention_heads must be a multiple of num_key_value_heads");
  c.rms_eps = j.value("rms_norm_eps", 1e-6);
  c.rope_theta = j.value("rope_theta", 1e6);
  if (j.contains("rope_parameters") && j["rope_parameters"].is_object())
    c.rope_theta = j["rope_parameters"].value("rope_theta", c.rope_theta);
  c.rope_scaling = parse_rope_scaling(j, j.value("max_position_embeddings", 4096), origin);
  if (auto* b = dflash_key(j, "block_size")) {
    if (!b->is_number_integer() || b->get<int>() < 2 || b->get<int>() > 256)
      throw file_error(origin, "block_size must be an integer in 2..256");
    c.block_size = b->get<int>();
  }
  if (auto* m = dflash_key(j, "mask_token_id")) {
    if (!m->is_number_integer()) throw file_error(origin, "mask_token_id must be an integer");
    c.mask_token_id = m->get<int>();
  } else {
    throw file_error(origin, "missing mask_token_id (top level or in dflash_config)");
  }
  c.num_target_layers = j.contains("num_target_layers") && j["num_target_layers"].is_number_integer()
                            ? j["num_target_layers"].get<int>() : target_layers;
  if (auto* t = dflash_key(j, "target_layer_ids"); t && !t->is_null()) {
    if (!t->is_array() || t->empty()) throw file_error(origin, "target_layer_ids must be a non-empty list");
    for (auto& v : *t) {
      if (!v.is_number_integer()) throw file_error(origin, "target_layer_ids must hold integers");
      c.target_layer_ids.push_back(v.get<int>());
    }
  } else {
    c.target_layer_ids = default_target_layer_ids(c.num_target_layers, c.n_layers);
    c.target_layers_from_formula = true;
  }
  return c;
}

std::unique_ptr<DFlashDraft> DFlashDraft::load(const std::string& dir, const LoadOptions& opt, const TargetModel& target) {
  if (has_gguf_suffix(dir)) return load_gguf(dir, opt, target);
  const std::string cfg_path = dir + "/config.json";
  const nlohmann::json j = read_json_file(cfg_path);
  if (draft_architecture(j) == "DFlash2DraftModel") return DFlash2Draft::load(dir, j, opt, target);
  auto d = std::make_unique<DFlashDraft>();
  d->cfg_ = DraftConfig::from_json(j, cfg_path, target.config().n_layers);
  WeightLoader L = d->load_common(dir, cfg_path, opt, target);
  for (const std::string& n : d->store_names())
    if (is_dflash2_tensor_name(n))
      throw file_error(dir, "the checkpoint mixes DFlash (v1) and DFlash2 parts: a DFlashDraftModel with tensor '" + n +
                                "'");
  return d;
}

std::unique_ptr<DFlashDraft> DFlashDraft::random(const DraftConfig& cfg, WType weights, const TargetModel& target,
                                                 uint64_t seed) {
  auto d = std::make_unique<DFlashDraft>();
  d->cfg_ = cfg;
  d->check_fits("random draft", target);
  const DraftConfig& c = d->cfg_;
  uint64_t state = seed * 0x9e3779b97f4a7c15ull + 7;
  const int64_t H = c.hidden;
  d->fc_ = random_weight_matrix(state, H, int64_t(c.target_layer_ids.size()) * H, weights);
  target.backend().prepare_weight(d->fc_);
  d->hidden_norm_.assign(size_t(H), 1.0f);
  d->norm_.assign(size_t(H), 1.0f);
  for (int l = 0; l < c.n_layers; ++l)  // Qwen3 layers: q/k norms, no biases
    d->layers_.push_back(random_layer_weights(target.backend(), state, H, c.n_heads, c.n_kv_heads, c.head_dim, c.ffn,
                                              weights, true, false));
  d->finish_load(target);
  return d;
}

void DFlashDraft::check_fits(const std::string& origin, const TargetModel& target) {
  const ModelConfig& tc = target.config();
  DraftConfig& c = cfg_;
  auto bad = [&](const std::string& what) { return file_error(origin, "draft does not fit the target: " + what); };
  if (c.hidden != tc.hidden)
    throw bad("hidden_size " + std::to_string(c.hidden) + " != target hidden_size " + std::to_string(tc.hidden));
  if (c.vocab != 0 && c.vocab != tc.vocab)
    throw bad("vocab_size " + std::to_string(c.vocab) + " != target vocab_size " + std::to_string(tc.vocab));
  if (c.num_target_layers != tc.n_layers)
    throw bad("num_target_layers " + std::to_string(c.num_target_layers) + " != target num_hidden_layers " +
              std::to_string(tc.n_layers));
  for (int id : c.target_layer_ids)
    if (id < 0 || id >= tc.n_layers)
      throw bad("target layer id " + std::to_string(id) + " is outside the target's " + std::to_string(tc.n_layers) +
                " layers");
  if (c.mask_token_id < 0 || c.mask_token_id >= tc.vocab)
    throw bad("mask_token_id " + std::to_string(c.mask_token_id) + " is outside the target's embedding (" +
              std::to_string(tc.vocab) + " rows)");
  c.vocab = tc.vocab;
}

void DFlashDraft::finish_load(const TargetModel& target) {
  ModelConfig rc;
  rc.head_dim = cfg_.head_dim;
  rc.rope_theta = cfg_.rope_theta;
  rc.rope_scaling = cfg_.rope_scaling;
  inv_freq_ = rope_inv_freq(rc);
  target_ = &target;
  backend_ = &target.backend();
}

WeightLoader DFlashDraft::load_common(const std::string& dir, const std::string& cfg_path, const LoadOptions& opt,
                                      const TargetModel& target) {
  DraftConfig& c = cfg_;
  // Compatibility with the target, before any weight is touched.
  check_fits(cfg_path, target);

  auto store = std::make_shared<TensorStore>(TensorStore::open_folder(dir));
  storage_ = store;
  WeightLoader L(*store, dir);
  prefix_ = dflash_hf_prefix(*store);
  read_dflash_weights(target.backend(), L, hf_tensor_naming(prefix_), c, opt.weights, {fc_, hidden_norm_, norm_, layers_});
  finish_load(target);
  return L;
}

std::vector<std::string> DFlashDraft::store_names() const {
  return static_cast<const TensorStore*>(storage_.get())->names();
}

}  // namespace dflash
