#include "models/qwen35/qwen35_head_order.h"

#include <cstring>
#include <stdexcept>

namespace dflash {

int64_t v_head_source_index(int64_t i, const VHeadSpan& s, VHeadOrder to) {
  const int64_t nk = s.key_heads, nv = s.value_heads;
  if (i < s.offset || i >= s.offset + nv * s.size || nk == nv) return i;
  const int64_t rel = i - s.offset, head = rel / s.size, within = rel % s.size, r = nv / nk;
  // Grouped head j = g * r + k (key head g, its k-th value head) is tiled position k * nk + g.
  const int64_t src = to == VHeadOrder::Tiled ? (head % nk) * r + head / nk  // tiled `head` <- grouped
                                               : (head % r) * nk + head / r;  // grouped `head` <- tiled
  return s.offset + src * s.size + within;
}

std::vector<float> reorder_v_heads(const std::vector<float>& v, const VHeadSpan& s, VHeadOrder to, int64_t unit) {
  std::vector<float> out(v.size());
  const int64_t n = int64_t(v.size()) / unit;
  for (int64_t i = 0; i < n; ++i)
    std::memcpy(&out[size_t(i * unit)], &v[size_t(v_head_source_index(i, s, to) * unit)], size_t(unit) * sizeof(float));
  return out;
}

namespace {

void require_row_major(const WeightMatrix& m) {
  // Packed Q8_0/Q4_0 has no rows to move; reordering happens before the backend packs.
  if (m.packed) throw std::logic_error("reorder_v_*: the matrix is already packed");
}

}  // namespace

WeightMatrix reorder_v_rows(const WeightMatrix& m, const VHeadSpan& s, VHeadOrder to, WType type) {
  require_row_major(m);
  uint8_t* out = nullptr;
  WeightMatrix w = alloc_weight_matrix(type, m.rows, m.cols, &out);
  const size_t rb = row_bytes(type, m.cols);
  std::vector<float> scratch(size_t(m.cols));
  for (int64_t r = 0; r < m.rows; ++r) {
    const int64_t src = v_head_source_index(r, s, to);
    if (type == m.type) {
      std::memcpy(out + size_t(r) * rb, m.row(src), rb);
    } else {
      dequantize_row(m, src, scratch.data());
      quantize_row(scratch.data(), m.cols, type, out + size_t(r) * rb);
    }
  }
  return w;
}

WeightMatrix reorder_v_columns(const WeightMatrix& m, const VHeadSpan& s, VHeadOrder to, WType type) {
  require_row_major(m);
  uint8_t* out = nullptr;
  WeightMatrix w = alloc_weight_matrix(type, m.rows, m.cols, &out);
  const size_t rb = row_bytes(type, m.cols);
  const int64_t be = block_elems(type);
  if (type == m.type && s.offset % be == 0 && s.size % be == 0) {
    // Whole blocks (or elements, for the float formats) move; their bytes stay as they are.
    const VHeadSpan blocks{s.offset / be, s.size / be, s.key_heads, s.value_heads};
    const size_t ub = row_bytes(type, be);
    const int64_t units = m.cols / be;
    for (int64_t r = 0; r < m.rows; ++r)
      for (int64_t u = 0; u < units; ++u)
        std::memcpy(out + size_t(r) * rb + size_t(u) * ub, m.row(r) + size_t(v_head_source_index(u, blocks, to)) * ub, ub);
    return w;
  }
  std::vector<float> row(size_t(m.cols)), moved(size_t(m.cols));
  for (int64_t r = 0; r < m.rows; ++r) {
    dequantize_row(m, r, row.data());
    for (int64_t c = 0; c < m.cols; ++c) moved[size_t(c)] = row[size_t(v_head_source_index(c, s, to))];
    quantize_row(moved.data(), m.cols, type, out + size_t(r) * rb);
  }
  return w;
}

}  // namespace dflash
