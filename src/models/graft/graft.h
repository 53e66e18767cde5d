#pragma once
// Grown pairs (dflash graft): a trained small target (dense Qwen3 or Qwen3.5 hybrid) and its
// DFlash draft grown into a real shape that computes the same function, so the engine pays real bytes and real
// multiply-adds while the draft keeps its trained acceptance. docs/graft.md has the rules and
// what such a pair measures.
#include <cstdint>
#include <string>

#include "formats/safetensors.h"

namespace dflash {

// The big shape (a dense Qwen3 decoder or a Qwen3.5 hybrid) and the grown draft's sizes.
struct GraftShape {
  std::string name;
  int hidden = 0, n_layers = 0, n_heads = 0, n_kv_heads = 0, head_dim = 0, ffn = 0, vocab = 0;
  bool tie_embeddings = true;
  int draft_layers = 5;  // the published drafts' depth
  // The draft's attention and MLP sizes; 0: the target's (dense Qwen3 drafts copy their
  // target's). Qwen3.5 drafts differ from their target's gated attention (27B's: 32/8 heads of 128).
  int draft_heads = 0, draft_kv_heads = 0, draft_head_dim = 0, draft_ffn = 0;
  // Qwen3.5 hybrids: RoPE's rotated dims per head and the Gated DeltaNet layers' sizes
  // (linear_key_heads 0: a dense shape). Layer l is full attention when (l + 1) % 4 == 0.
  int rope_dims = 0;
  int linear_key_heads = 0, linear_value_heads = 0, linear_key_dim = 0, linear_value_dim = 0, linear_conv = 0;
  bool hybrid() const { return linear_key_heads > 0; }
};

struct GraftOptions {
  std::string model;  // small target folder (Qwen3ForCausalLM)
  std::string draft;  // its DFlashDraftModel or DFlash2DraftModel folder
  std::string out;    // writes out/target, out/draft, out/graft.json
  GraftShape shape;
  DType dtype = DType::BF16;  // matrices; 1-D tensors (norms) are always F32
  uint64_t seed = 1;          // the dead weights' random values
};

// Writes the grown pair; throws Error when the small pair does not fit inside the shape.
void graft_pair(const GraftOptions& o);

}  // namespace dflash
