#pragma once
// The order of a Gated DeltaNet layer's value heads (../shared/qwen35-format.md §2.5).
// Hugging Face checkpoints keep them *grouped* by key head: with r = nv / nk value heads per
// key head, value head j reads key head j / r, so key head g's r value heads sit side by side.
// llama.cpp's GGUF files hold them *tiled* (value head i of every key group, then i + 1, ...),
// which lets ggml broadcast q/k over the value heads with a plain repeat. The engine's forward
// reads the grouped order; the GGUF loader puts the tiled order back and the writer makes it.
// With nk == nv both orders are the same and nothing moves.
#include <cstdint>
#include <vector>

#include "kernels/weight_matrix.h"

namespace dflash {

enum class VHeadOrder : uint8_t { Grouped, Tiled };

// Where value heads sit along one axis of a tensor: `count` heads of `size` consecutive
// entries each, starting at `offset` (entries outside are not value heads and never move).
struct VHeadSpan {
  int64_t offset = 0, size = 1;
  int key_heads = 1, value_heads = 1;
};

// The index along the axis that entry `i` of the result is read from, for a result in order
// `to` made from a source in the other order.
int64_t v_head_source_index(int64_t i, const VHeadSpan& s, VHeadOrder to);

// `v` (one entry per index of the axis, `unit` floats each) in order `to`.
std::vector<float> reorder_v_heads(const std::vector<float>& v, const VHeadSpan& s, VHeadOrder to, int64_t unit = 1);

// A row-major matrix whose rows (reorder_v_rows) or columns (reorder_v_columns) are value
// heads, reordered to `to` and stored as `type`. Rows move as whole byte rows when `type` is
// the matrix's own; columns move as whole blocks when a head is a whole number of the type's
// blocks. Otherwise each row is decoded to fp32, reordered and encoded again (exact for the
// float formats; for a quantized matrix whose heads split its blocks, a requantization).
WeightMatrix reorder_v_rows(const WeightMatrix& m, const VHeadSpan& s, VHeadOrder to, WType type);
WeightMatrix reorder_v_columns(const WeightMatrix& m, const VHeadSpan& s, VHeadOrder to, WType type);

}  // namespace dflash
