#pragma once
// The integer matmul path for the block-quantized weight formats (Q8_0, Q4_0, Q4_K, Q6_K).
//
// Each activation row is quantized on the fly to int8 blocks of 32 with one fp32 scale per
// block (d = max|x| / 127, q = round-to-nearest-even(x * 127 / max|x|)), so a block's product
// with a weight block is an exact integer. The fp32 part is fixed by this definition, shared
// by the fast kernels and their reference twin, which is why they agree bit for bit:
//   Q8_0, Q4_0 (either layout): one fp32 accumulator per output, blocks in increasing order,
//              acc = fma(float(isum(b)), dw(b) * dx(b), acc), starting at +0, y = acc
//              (isum = the block's exact integer dot product of signed weights and x; fma is
//              the fused, singly rounded multiply-add). One chain per output is what lets a
//              register tile of outputs be accumulated in registers at any batch size.
//   Q4_K, Q6_K: term(b) = the block's integer sum times its scales:
//              Q4_K: float(sc * isum) * (d * dx) - float(m * xsum) * (dmin * dx)
//              Q6_K: float(sum over both 16-halves of sc * isum16) * (d * dx)
//              acc[j] = sum of term(b) over blocks b = j (mod 8), in increasing b, from +0
//              y = ((acc0 + acc1) + (acc2 + acc3)) + ((acc4 + acc5) + (acc6 + acc7))
// Nothing here depends on the batch size or the thread split, so batch invariance holds.
#include <cstdint>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/weight_matrix.h"
#include "util/thread_pool.h"

namespace dflash {

constexpr int kActGroup = 8;  // blocks of 32 per accumulator set (one k-quant super-block)

// The Q8_0/Q4_0 term of the definition above: acc + isum * (dw * dx), singly rounded.
inline float block_fma(int32_t isum, float dw, float dx, float acc) {
  return __builtin_fmaf(float(isum), dw * dx, acc);
}

// Quantized activation rows, K padded with zeros to a multiple of 256 (Kp).
struct QuantActs {
  int rows = 0;
  int64_t K = 0, Kp = 0;
  std::vector<int8_t> q;     // [rows][Kp]
  std::vector<float> d;      // [rows][Kp / 32] block scales
  std::vector<int32_t> s;    // [rows][Kp / 32] block sums of q
  std::vector<int16_t> s16;  // [rows][Kp / 16] sums of q over 16 (Q6_K's scale granularity)
  void resize(int m, int64_t k);
  const int8_t* qrow(int r) const { return q.data() + size_t(r) * size_t(Kp); }
  const float* drow(int r) const { return d.data() + size_t(r) * size_t(Kp / 32); }
  const int32_t* srow(int r) const { return s.data() + size_t(r) * size_t(Kp / 32); }
  const int16_t* s16row(int r) const { return s16.data() + size_t(r) * size_t(Kp / 16); }
};

// Fast (SIMD) and reference activation quantization; bitwise identical.
void quantize_acts(const float* x, int M, int64_t K, QuantActs& out);
// matmul() for the int8 formats: quantizes x, then splits the weight rows over the pool.
void qmatmul(const float* x, int M, const WeightMatrix& w, float* y, ThreadPool* pool);
// matmul_multi() for int8 formats: x quantized once, every matrix's pieces in one parallel_for.
void qmatmul_multi(const float* x, int M, const MatmulOut* outs, int n_outs, ThreadPool* pool);
// y[m][n] for n in [n0, n1) from already quantized activations (fast kernel, one thread;
// row-layout matrices).
void qmatmul_range(const QuantActs& a, int M, const WeightMatrix& w, float* y, int64_t n0, int64_t n1);
// The same for a packed Q8_0/Q4_0 matrix, over its 16-row groups [g0, g1). Up to
// kPackedOnePassRows activation rows pass over each weight block once; more come back to a
// range's weights in chunks of that many rows.
constexpr int kPackedOnePassRows = 64;
void qmatmul_packed_range(const QuantActs& a, int M, const WeightMatrix& w, float* y, int64_t g0, int64_t g1);
// ARM: whether the CPU has SDOT (ARMv8.2 dotprod), and the packed kernel that uses it
// (qmatmul_packed_neon.cpp); qmatmul_packed_range calls it when the CPU has it.
bool neon_dotprod_available();
void qmatmul_packed_range_dotprod(const QuantActs& a, int M, const WeightMatrix& w, float* y, int64_t g0, int64_t g1);
// x86-64: whether the CPU has AMX-TILE and AMX-INT8 (with AVX-512 F/BW) and Linux lets this
// process use the tiles, and the packed kernel that uses them (qmatmul_amx.cpp, bit-equal to
// the others; not tested on AMX hardware yet). qmatmul_packed_range calls it for batches of
// at least kAmxMinRows rows when the CPU has it: a choice made from M and the CPU alone.
constexpr int kAmxMinRows = 16;
bool amx_int8_available();
void qmatmul_packed_range_amx(const QuantActs& a, int M, const WeightMatrix& w, float* y, int64_t g0, int64_t g1);

namespace ref {
void quantize_acts(const float* x, int M, int64_t K, QuantActs& out);
void qmatmul(const QuantActs& a, int M, const WeightMatrix& w, float* y);
}  // namespace ref

}  // namespace dflash
