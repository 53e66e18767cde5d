// The CPU backend: the Highway kernels of kernels/cpu on a thread pool of its own.
#include <atomic>
#include <memory>
#include <new>
#include <string>

#include "kernels/backend.h"
#include "util/mapped_file.h"
#include "util/thread_pool.h"

namespace dflash {

namespace {

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(int threads)
      : pool_(std::make_unique<ThreadPool>(threads > 0 ? threads : default_thread_count())),
        name_(std::string("cpu (") + simd_target_name() + ", " + std::to_string(pool_->size()) + " threads)") {}

  const char* name() const override { return name_.c_str(); }
  int threads() const override { return pool_->size(); }

  void prepare_weight(WeightMatrix& w) const override {
    if (!packable(w)) return;
    const bool mapped = !w.owner;
    const uint8_t* src = w.data;
    const size_t n = w.bytes();
    w = pack_weight_matrix(w);
    if (mapped) release_mapped_pages(src, n);
  }
  std::shared_ptr<uint8_t> allocate(size_t bytes) const override { return alloc_pages(bytes); }
  // Buffers past malloc's mmap threshold come back page-aligned, so every activation buffer
  // of a large call would start at the same offset in a page: a store to one and a load from
  // another then look alike to the core's memory disambiguation (4K aliasing) and their lines
  // share cache sets. Each buffer starts a different number of cache lines into its block.
  std::shared_ptr<uint8_t> allocate_activations(size_t bytes) const override {
    const size_t skew = 64 * (next_skew_.fetch_add(1, std::memory_order_relaxed) % 61 + 1);
    auto* base = static_cast<uint8_t*>(::operator new[](bytes + skew, std::align_val_t(64)));
    std::shared_ptr<uint8_t> owner(base, [](uint8_t* q) { ::operator delete[](q, std::align_val_t(64)); });
    return std::shared_ptr<uint8_t>(owner, base + skew);
  }

  void matmul(const float* x, int M, const WeightMatrix& w, float* y) const override {
    dflash::matmul(x, M, w, y, pool_.get());
  }
  void matmul_multi(const float* x, int M, std::initializer_list<MatmulOut> outs) const override {
    dflash::matmul_multi(x, M, outs, pool_.get());
  }
  void attention(const AttentionArgs& a) const override { dflash::attention(a, pool_.get()); }
  void rmsnorm(const float* x, int rows, int dim, const float* w, float eps, float* out) const override {
    dflash::rmsnorm(x, rows, dim, w, eps, out);
  }
  void rope_neox(float* x, int rows, int n_heads, int head_dim, const float* cos, const float* sin) const override {
    dflash::rope_neox(x, rows, n_heads, head_dim, cos, sin);
  }
  void rope_tables(const double* inv_freq, int half, const int* pos, int n, float mscale, float* cos,
                   float* sin) const override {
    rope_table_rows(inv_freq, half, pos, n, mscale, cos, sin);
  }
  void silu_mul(const float* gate, const float* up, int64_t n, float* out) const override {
    dflash::silu_mul(gate, up, n, out);
  }
  void dequantize_row(const WeightMatrix& w, int64_t r, float* out) const override { dflash::dequantize_row(w, r, out); }
  void add(float* x, const float* y, size_t n) const override { add_rows(x, y, n); }
  void add_bias(float* x, int rows, const float* b, int n) const override { add_bias_rows(x, rows, b, n); }
  void scale(float* x, size_t n, float s) const override { scale_rows(x, n, s); }
  void round_to_f16(float* x, size_t n) const override { round_rows_to_f16(x, n); }
  void softcap(float* x, size_t n, float cap) const override { softcap_rows(x, n, cap); }
  bool all_finite(const float* x, size_t n) const override { return all_finite_rows(x, n); }
  void causal_block_conv(const BlockConvArgs& a) const override { dflash::causal_block_conv(a); }
  void edge_scores(const EdgeScoreArgs& a) const override { dflash::edge_scores(a); }
  void top_k(const float* x, int rows, int n, int k, int32_t* out) const override {
    top_k_ids(x, rows, n, k, out);
  }
  void sigmoid_gate(float* x, const float* gate, size_t n) const override { sigmoid_gate_rows(x, gate, n); }
  void rope_neox_partial(float* x, int rows, int n_heads, int head_dim, int rot, const float* cos,
                         const float* sin) const override {
    rope_neox_partial_rows(x, rows, n_heads, head_dim, rot, cos, sin);
  }
  void short_conv(const ShortConvArgs& a) const override { causal_conv_silu(a); }
  void roll_conv_state(const float* state, const float* in, int rows, int channels, int kernel,
                       float* state_next) const override {
    dflash::roll_conv_state(state, in, rows, channels, kernel, state_next);
  }
  void gated_delta_net(const GatedDeltaArgs& a) const override { dflash::gated_delta_net(a, pool_.get()); }

 private:
  std::unique_ptr<ThreadPool> pool_;
  std::string name_;
  mutable std::atomic<unsigned> next_skew_{0};
};

}  // namespace

std::shared_ptr<Backend> make_cpu_backend(int threads) { return std::make_shared<CpuBackend>(threads); }

}  // namespace dflash
