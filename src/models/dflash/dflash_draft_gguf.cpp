// DFlash drafts as llama.cpp's convert_hf_to_gguf.py writes them (general.architecture
// "dflash"): the z-lab folder's tensors under llama.cpp names (fc, enc.output_norm for
// hidden_norm, output_norm for norm, blk.N.* for the layers), no embedding or head (the
// target's are used), hyper-parameters as dflash.* keys and the mask token as
// tokenizer.ggml.mask_token_id.
//
// dflash.target_layers holds each z-lab target_layer_id + 1: llama.cpp taps the *input* of a
// layer, and the input of layer k + 1 is the output of layer k, which is what z-lab's id k
// names. This engine taps outputs, so the ids are stored back minus 1.
#include "formats/gguf.h"
#include "models/dflash/dflash_draft.h"
#include "models/dflash/dflash_tensors.h"
#include "models/gguf_weights.h"
#include "util/error.h"

namespace dflash {

namespace {

constexpr const char* kArch = "dflash";

int gguf_positive(const GgufFile& f, const std::string& key, std::optional<int> fallback) {
  auto v = f.get_int(key);
  if (!v) {
    if (fallback) return *fallback;
    throw file_error(f.path(), "missing metadata key '" + key + "'");
  }
  if (*v <= 0 || *v > (1 << 24)) throw file_error(f.path(), "metadata key '" + key + "' must be a positive integer");
  return int(*v);
}

}  // namespace

std::unique_ptr<DFlashDraft> DFlashDraft::load_gguf(const std::string& path, const LoadOptions& opt,
                                                    const TargetModel& target) {
  auto file = std::make_shared<GgufFile>(path);
  const GgufFile& f = *file;
  const std::string arch = f.get_string("general.architecture").value_or("");
  if (arch != kArch)
    throw file_error(path, "not a DFlash draft: general.architecture is '" + arch + "' (expected '" + kArch + "')");
  const std::string a = std::string(kArch) + ".";
  for (const auto& t : f.tensors())
    if (t.name.find("selector") != std::string::npos || t.name.find("_conv") != std::string::npos)
      throw file_error(path, "tensor '" + t.name + "' belongs to a DFlash2 draft, which is only read from its folder");
  // Attention windows exist in this format (dflash.attention.sliding_window); v1 drafts here
  // attend to the whole context, so refuse rather than run a different model.
  if (f.find(a + "attention.sliding_window"))
    throw file_error(path, "sliding-window DFlash drafts (" + a + "attention.sliding_window) are not supported");
  if (f.get_string(a + "rope.scaling.type").value_or("none") != "none")
    throw file_error(path, "RoPE scaling in a DFlash draft is not supported");

  auto d = std::make_unique<DFlashDraft>();
  DraftConfig& c = d->cfg_;
  c.hidden = gguf_positive(f, a + "embedding_length", std::nullopt);
  c.n_layers = gguf_positive(f, a + "block_count", std::nullopt);
  c.n_heads = gguf_positive(f, a + "attention.head_count", std::nullopt);
  c.n_kv_heads = gguf_positive(f, a + "attention.head_count_kv", c.n_heads);
  c.head_dim = gguf_positive(f, a + "attention.key_length", c.hidden / c.n_heads);
  c.ffn = gguf_positive(f, a + "feed_forward_length", std::nullopt);
  if (c.n_heads % c.n_kv_heads != 0)
    throw file_error(path, "attention.head_count must be a multiple of attention.head_count_kv");
  c.rms_eps = f.get_float(a + "attention.layer_norm_rms_epsilon").value_or(1e-6);
  c.rope_theta = f.get_float(a + "rope.freq_base").value_or(1e6);
  c.block_size = gguf_positive(f, a + "block_size", 16);  // llama.cpp's default when absent
  if (c.block_size < 2 || c.block_size > 256) throw file_error(path, a + "block_size must be in 2..256");
  auto mask = f.get_int("tokenizer.ggml.mask_token_id");
  if (!mask) throw file_error(path, "missing metadata key 'tokenizer.ggml.mask_token_id'");
  c.mask_token_id = *mask >= 0 && *mask <= INT32_MAX ? int(*mask) : -1;
  const GgufValue* ids = f.find(a + "target_layers");
  if (!ids) throw file_error(path, "missing metadata key '" + a + "target_layers'");
  if (ids->type != GgufValueType::ARRAY || ids->items.empty())
    throw file_error(path, "metadata key '" + a + "target_layers' must be a non-empty array of integers");
  for (const auto& v : ids->items) {
    if (!v.is_int()) throw file_error(path, "metadata key '" + a + "target_layers' must hold integers");
    if (v.i < 1 || v.i > (1 << 24))
      throw file_error(path, "metadata key '" + a + "target_layers' holds " + std::to_string(v.i) +
                                 ": ids are stored + 1 (a layer's input), so each must be at least 1");
    c.target_layer_ids.push_back(int(v.i - 1));
  }
  c.num_target_layers = target.config().n_layers;
  d->check_fits(path, target);

  read_dflash_weights(target.backend(), GgufWeights(f), gguf_tensor_naming(), c, opt.weights,
                      {d->fc_, d->hidden_norm_, d->norm_, d->layers_});
  d->storage_ = file;
  d->finish_load(target);
  return d;
}

}  // namespace dflash
