#pragma once
// How one small tensor becomes one big tensor. Indices of the big tensor map to indices of the
// small one ("live") or to nothing ("dead"); the rules of docs/graft.md then fill it:
//   live row x live column   -> the trained value
//   any row  x dead column   -> random (the input there is exactly zero, so it costs like a real
//                               weight and changes nothing)
//   dead row x live column   -> 0 (dead outputs stay exactly zero)
//   any row  x "zero" column -> 0 (inputs that are not zero but must not be read: a dead query
//                               head attends uniformly to a live value head, so its output
//                               is non-zero; extra layers read nothing from live channels)
//   a "zero row"             -> 0 everywhere (extra layers write nothing into live channels)
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "formats/safetensors.h"
#include "formats/safetensors_write.h"

namespace dflash {

constexpr int kDead = -1;     // column/row with no small counterpart, input exactly zero
constexpr int kZeroCol = -2;  // column whose input may be non-zero but must not be read
constexpr int kZeroRow = -3;  // row that must write nothing
constexpr int kConstChannels = 2;  // constant channels of the grown residual stream

// A small tensor read whole as fp32, [rows][cols] (rows = product of the leading dims).
struct SmallTensor {
  std::vector<int64_t> shape;
  int64_t rows = 0, cols = 0;
  std::vector<float> v;
  float at(int64_t r, int64_t c) const { return v[size_t(r * cols + c)]; }
};
SmallTensor read_small(const TensorStore& store, const std::string& name);

// The index maps between a small decoder and a big one.
struct GrowMaps {
  int Hs, Hb;      // hidden
  int hds, hdb;    // head_dim; hdb must be a multiple of hds (f = hdb / hds)
  int nHs, nHb;    // query heads
  int nKVs, nKVb;  // key/value heads
  int Fs, Fb;      // ffn
  int f() const { return hdb / hds; }
  // The small query head that big query head hb carries, or -1. The GQA groups must line up:
  // small head h (group h / gs, slot h % gs) sits in big group h / gs at slot h % gs.
  int small_q_head(int hb) const;
  // Hidden channels. The two after the live ones (Hs, Hs+1) hold a constant in the residual
  // stream (graft_pair.cpp: it pushes the padding logits down): no matrix reads them (kZeroCol) and
  // the rows writing them are dead rows (zero on every non-zero input).
  int hid(int c) const { return c < Hs ? c : c < Hs + kConstChannels ? kZeroCol : kDead; }
  int ffn(int i) const { return i < Fs ? i : kDead; }
  // q and k rows: small dim j of a head sits at big dim f*j, so that NeoX RoPE's pair
  // (j, j + hds/2) lands on the big pair (f*j, f*j + hdb/2) with the same frequency
  // theta^(-2j/hds) = theta^(-2fj/hdb); the other big pairs are dead.
  int qrow(int i) const;
  int krow(int i) const;
  // v rows keep the small dims first (no rotation), so the attention output's live columns
  // are whole 32-blocks for the block weight formats.
  int vrow(int i) const;
  // o_proj's input columns (the attention output of each query head).
  int ocol(int i) const;
};

// One tensor of the grown checkpoint: its header and a row generator (fp32).
struct GrownTensor {
  TensorToWrite meta;
  std::function<void(int64_t row, float* out)> row;
};

// A matrix by the rules above. `src` null: no trained values (extra layers). Column maps are
// evaluated once; `row_map` per row.
GrownTensor grow_matrix(const std::string& name, std::vector<int64_t> shape, const SmallTensor* src,
                        const std::function<int(int64_t)>& row_map, const std::function<int(int64_t)>& col_map,
                        uint64_t seed, DType dtype);

// A 1-D tensor: value(i) for every i (norm weights; written F32 so that scaled values are not
// rounded again).
GrownTensor grow_vector(const std::string& name, int64_t n, std::function<float(int64_t)> value);

// `t` with each row passed through `patch` after it is generated (a few special entries).
GrownTensor patched(GrownTensor t, std::function<void(int64_t row, float* out)> patch);

// Writes `tensors` to path in `dtype` order, converting each row from fp32.
void write_grown(const std::string& path, std::vector<GrownTensor>& tensors);

// Random values of the dead weights: uniform in [-0.02, 0.02], a function of (seed, row, col).
uint64_t tensor_seed(uint64_t seed, const std::string& name);

}  // namespace dflash
