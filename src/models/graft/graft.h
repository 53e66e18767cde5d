#pragma once
// Grown pairs (dflash graft): a trained small dense Qwen3 target and its DFlash draft grown
// into a real shape that computes the same function, so the engine pays real bytes and real
// multiply-adds while the draft keeps its trained acceptance. docs/graft.md has the rules and
// what such a pair measures.
#include <cstdint>
#include <string>

#include "formats/safetensors.h"

namespace dflash {

// The big shape (a dense Qwen3 decoder) and the grown draft's depth.
struct GraftShape {
  std::string name;
  int hidden = 0, n_layers = 0, n_heads = 0, n_kv_heads = 0, head_dim = 0, ffn = 0, vocab = 0;
  bool tie_embeddings = true;
  int draft_layers = 5;  // the published drafts' depth
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
