// The value-head orders of a Gated DeltaNet layer (models/qwen35/qwen35_head_order.h): the
// tiled order is llama.cpp's (its converter's _reorder_v_heads: view [nk, r, size], swap the
// first two axes), tiling then grouping is the identity, and a matrix's rows and columns move
// bit-exactly: as whole bytes in its own type, as whole blocks when a head is whole blocks,
// and an f32 row tiled then quantized equals the quantized row with its blocks moved.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "models/qwen35/qwen35_head_order.h"

using namespace dflash;

namespace {

// llama.cpp's reorder written out: index (g, k, d) of [nk, r, size] goes to (k, g, d).
std::vector<int64_t> llamacpp_tiled_source(int nk, int nv, int64_t size) {
  const int r = nv / nk;
  std::vector<int64_t> src(size_t(nv * size));
  for (int g = 0; g < nk; ++g)
    for (int k = 0; k < r; ++k)
      for (int64_t d = 0; d < size; ++d) src[size_t((k * nk + g) * size + d)] = (g * r + k) * size + d;
  return src;
}

WeightMatrix f32_matrix(int64_t rows, int64_t cols, std::vector<float>& store) {
  store.resize(size_t(rows * cols));
  for (size_t i = 0; i < store.size(); ++i) store[i] = float(int64_t(i * 2654435761u % 1000) - 500) / 97.0f;
  return make_weight_matrix(store.data(), rows, cols, WType::F32);
}

bool same_bytes(const WeightMatrix& a, const WeightMatrix& b) {
  return a.rows == b.rows && a.cols == b.cols && a.type == b.type &&
         std::memcmp(a.data, b.data, size_t(a.rows) * row_bytes(a.type, a.cols)) == 0;
}

}  // namespace

TEST(Qwen35HeadOrder, TiledIsLlamaCppsOrderAndGroupedUndoesIt) {
  for (auto [nk, nv] : {std::pair{2, 4}, {2, 6}, {16, 48}, {3, 3}}) {
    const int64_t size = 5;
    const VHeadSpan s{7, size, nk, nv};  // 7 leading entries (q|k channels) that never move
    const auto want = llamacpp_tiled_source(nk, nv, size);
    for (int64_t i = 0; i < 7 + nv * size + 3; ++i) {
      const int64_t t = v_head_source_index(i, s, VHeadOrder::Tiled);
      if (i < 7 || i >= 7 + nv * size) {
        EXPECT_EQ(t, i);
      } else {
        EXPECT_EQ(t, 7 + want[size_t(i - 7)]) << nk << "/" << nv << " at " << i;
      }
      // Grouping what tiling read gives back the index: the two maps are inverse permutations.
      EXPECT_EQ(v_head_source_index(v_head_source_index(i, s, VHeadOrder::Grouped), s, VHeadOrder::Tiled), i);
    }
  }
}

TEST(Qwen35HeadOrder, VectorsMoveWholeUnits) {
  std::vector<float> v(2 * 6 * 3);  // 6 heads of 2 entries, 3 floats per entry (conv taps)
  for (size_t i = 0; i < v.size(); ++i) v[i] = float(i);
  const VHeadSpan s{0, 2, 2, 6};
  const auto t = reorder_v_heads(v, s, VHeadOrder::Tiled, 3);
  EXPECT_EQ(reorder_v_heads(t, s, VHeadOrder::Grouped, 3), v);
  // Tiled position 1 is key head 1's first value head, grouped head 3 (entries 6, 7).
  EXPECT_EQ(t[size_t(2 * 3)], v[size_t(6 * 3)]);
  EXPECT_EQ(t[size_t(2 * 3 + 5)], v[size_t(6 * 3 + 5)]);
}

TEST(Qwen35HeadOrder, MatricesRoundTripBitExactly) {
  std::vector<float> store;
  const WeightMatrix m = f32_matrix(4 * 32 + 8, 4 * 32, store);  // 8 leading rows, 4 heads of 32
  const VHeadSpan rows{8, 32, 2, 4}, cols{0, 32, 2, 4};
  for (WType t : {WType::F32, WType::BF16, WType::Q8_0, WType::Q4_0}) {
    const WeightMatrix base = make_weight_matrix(store.data(), m.rows, m.cols, t);
    const WeightMatrix r = reorder_v_rows(base, rows, VHeadOrder::Tiled, t);
    EXPECT_TRUE(same_bytes(reorder_v_rows(r, rows, VHeadOrder::Grouped, t), base)) << wtype_name(t);
    const WeightMatrix c = reorder_v_columns(base, cols, VHeadOrder::Tiled, t);
    EXPECT_TRUE(same_bytes(reorder_v_columns(c, cols, VHeadOrder::Grouped, t), base)) << wtype_name(t);
    // The writer's path (f32 tiled, then encoded) gives the blocks the loader moves back.
    EXPECT_TRUE(same_bytes(reorder_v_columns(m, cols, VHeadOrder::Tiled, t), c)) << wtype_name(t);
    EXPECT_TRUE(same_bytes(reorder_v_rows(m, rows, VHeadOrder::Tiled, t), r)) << wtype_name(t);
  }
}

TEST(Qwen35HeadOrder, HeadsSplittingBlocksGoThroughFp32) {
  // Heads of 16 columns split Q8_0's 32-blocks: the columns are decoded, moved and encoded
  // again. Through bf16 (element moves) nothing is lost; the f32 values come back exactly.
  std::vector<float> store;
  const WeightMatrix m = f32_matrix(3, 6 * 16, store);
  const VHeadSpan cols{0, 16, 2, 6};
  const WeightMatrix t = reorder_v_columns(m, cols, VHeadOrder::Tiled, WType::F32);
  EXPECT_TRUE(same_bytes(reorder_v_columns(t, cols, VHeadOrder::Grouped, WType::F32), m));
  const WeightMatrix q = reorder_v_columns(m, cols, VHeadOrder::Tiled, WType::Q8_0);
  EXPECT_EQ(q.type, WType::Q8_0);
  std::vector<float> row(96);
  dequantize_row(q, 0, row.data());
  const float* tr = reinterpret_cast<const float*>(t.data);
  for (int c = 0; c < 96; ++c) EXPECT_NEAR(row[size_t(c)], tr[c], 0.05f);
}
