#pragma once
// The one object a model forward talks to for compute and memory. A backend owns how weights
// are prepared for its kernels (layouts, pages), the memory of activations and of sequence
// states (KV caches, recurrent states), its threads, and the ops. Models hold a Backend and
// call ops on it; they never loop over floats themselves, never pick a weight layout and
// never see a thread pool. The CPU backend is kernels/cpu/cpu_backend.h; a CUDA backend
// would be kernels/cuda/, implementing this class (docs/architecture.md).
//
// Batch invariance (every backend must keep it): a row's output of every op depends only on
// that row's inputs (and, for attention, on its own query and key range), never on how many
// rows are in the call, how they are split across threads, or which other sequences share
// the call. So a position's logits are bitwise the same in decode, in a verify block and in
// any prefill chunk, alone or batched with other sequences.
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <vector>

#include "kernels/gated_delta.h"
#include "kernels/kernels.h"
#include "kernels/vector_ops.h"
#include "kernels/weight_matrix.h"

namespace dflash {

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* name() const = 0;  // "cpu (AVX3, 2 threads)"
  virtual int threads() const = 0;

  // --- Weights and memory ---
  // The matrix in the layout this backend's kernels stream (CPU: Q8_0/Q4_0 interleaved;
  // lossless). A memory-mapped source's pages are released once copied, so a file is not
  // held in memory twice.
  virtual void prepare_weight(WeightMatrix& w) const = 0;
  // Memory for sequence states (KV caches, recurrent states) and activations, zero-filled,
  // freed when the last owner lets go. CPU: anonymous pages, mapped as the context fills and
  // in huge pages where large.
  virtual std::shared_ptr<uint8_t> allocate(size_t bytes) const = 0;
  // Memory for a model's activations (rewritten every forward, read while hot). CPU: the heap,
  // 64-byte aligned: page-aligned buffers would all start at the same offset in a page and
  // contend for the same cache sets.
  virtual std::shared_ptr<uint8_t> allocate_activations(size_t bytes) const = 0;

  // --- Ops (definitions and batch invariance: kernels.h, vector_ops.h) ---
  virtual void matmul(const float* x, int M, const WeightMatrix& w, float* y) const = 0;
  virtual void matmul_multi(const float* x, int M, std::initializer_list<MatmulOut> outs) const = 0;
  virtual void attention(const AttentionArgs& a) const = 0;
  virtual void rmsnorm(const float* x, int rows, int dim, const float* w, float eps, float* out) const = 0;
  virtual void rope_neox(float* x, int rows, int n_heads, int head_dim, const float* cos, const float* sin) const = 0;
  // cos/sin tables ([n][inv_freq.size()]) for the positions pos[0..n), times mscale (YaRN).
  virtual void rope_tables(const double* inv_freq, int half, const int* pos, int n, float mscale, float* cos,
                           float* sin) const = 0;
  virtual void silu_mul(const float* gate, const float* up, int64_t n, float* out) const = 0;
  virtual void dequantize_row(const WeightMatrix& w, int64_t r, float* out) const = 0;
  virtual void add(float* x, const float* y, size_t n) const = 0;                   // x += y
  virtual void add_bias(float* x, int rows, const float* b, int n) const = 0;       // x[r] += b
  virtual void scale(float* x, size_t n, float s) const = 0;                        // x *= s
  virtual void round_to_f16(float* x, size_t n) const = 0;                          // x = f16(x)
  virtual void softcap(float* x, size_t n, float cap) const = 0;                    // cap*tanh(x/cap)
  virtual bool all_finite(const float* x, size_t n) const = 0;
  virtual void causal_block_conv(const BlockConvArgs& a) const = 0;
  virtual void edge_scores(const EdgeScoreArgs& a) const = 0;
  virtual void top_k(const float* x, int rows, int n, int k, int32_t* out) const = 0;
  // Gated attention and Gated DeltaNet (Qwen3.5 hybrids; kernels/gated_delta.h).
  virtual void sigmoid_gate(float* x, const float* gate, size_t n) const = 0;  // x *= sigmoid(gate)
  virtual void rope_neox_partial(float* x, int rows, int n_heads, int head_dim, int rot, const float* cos,
                                 const float* sin) const = 0;
  virtual void short_conv(const ShortConvArgs& a) const = 0;
  virtual void roll_conv_state(const float* state, const float* in, int rows, int channels, int kernel,
                               float* state_next) const = 0;
  virtual void gated_delta_net(const GatedDeltaArgs& a) const = 0;
};

// A model's activation buffer: taken from the backend at the first call and grown only when a
// call brings more rows than any before, so a forward allocates nothing in steady state.
class ActivationBuffer {
 public:
  float* floats(const Backend& be, size_t n) {
    if (n > capacity_) {
      memory_ = be.allocate_activations(n * sizeof(float));
      capacity_ = n;
    }
    return reinterpret_cast<float*>(memory_.get());
  }
  int* ints(const Backend& be, size_t n) {
    static_assert(sizeof(int) == sizeof(float));
    return reinterpret_cast<int*>(floats(be, n));
  }

 private:
  std::shared_ptr<uint8_t> memory_;
  size_t capacity_ = 0;
};

// The CPU backend with `threads` threads (0: all cores), shared by a model pair.
std::shared_ptr<Backend> make_cpu_backend(int threads = 0);

}  // namespace dflash
