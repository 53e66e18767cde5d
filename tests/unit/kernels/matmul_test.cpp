// The fast matmul against its plain reference twin, for every weight format and batch size,
// and bitwise batch invariance of the fast kernel.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/kernels.h"

using namespace dflash;

namespace {

std::vector<float> randn(size_t n, uint64_t seed, float scale = 1.0f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = nd(rng);
  return v;
}

const WType kAllTypes[] = {WType::F32, WType::F16, WType::BF16, WType::Q8_0, WType::Q4_0};

}  // namespace

TEST(Matmul, FastMatchesReferenceForEveryFormatAndBatch) {
  ThreadPool pool(2);
  for (WType t : kAllTypes) {
    for (int K : {32, 96, 256, 896}) {
      const int N = 67;
      auto wf = randn(size_t(N) * K, 1 + K);
      WeightMatrix w = make_weight_matrix(wf.data(), N, K, t);
      for (int M : {1, 2, 3, 5, 8, 9, 16, 17}) {
        auto x = randn(size_t(M) * K, 100 + M);
        std::vector<float> yf(size_t(M) * N), yr(size_t(M) * N);
        matmul(x.data(), M, w, yf.data(), &pool);
        ref::matmul(x.data(), M, w, yr.data());
        for (int m = 0; m < M; ++m)
          for (int n = 0; n < N; ++n) {
            // Bound on fp32 reordering error: a few ulps of sum |w||x| per term count.
            std::vector<float> row(static_cast<size_t>(K));
            dequantize_row(w, n, row.data());
            double mag = 0;
            for (int k = 0; k < K; ++k) mag += std::fabs(row[size_t(k)] * x[size_t(m) * K + k]);
            const double tol = 4 * K * 1.2e-7 * mag + 1e-6;
            ASSERT_NEAR(yf[size_t(m) * N + n], yr[size_t(m) * N + n], tol)
                << wtype_name(t) << " K=" << K << " M=" << M << " m=" << m << " n=" << n;
          }
      }
    }
  }
}

TEST(Matmul, RowResultDoesNotDependOnBatchSizeOrThreads) {
  ThreadPool pool1(1), pool2(2);
  const int K = 896, N = 131, M = 23;
  for (WType t : kAllTypes) {
    auto wf = randn(size_t(N) * K, 7);
    WeightMatrix w = make_weight_matrix(wf.data(), N, K, t);
    auto x = randn(size_t(M) * K, 8);
    std::vector<float> big(size_t(M) * N);
    matmul(x.data(), M, w, big.data(), &pool2);
    for (int m = 0; m < M; ++m) {
      std::vector<float> one(static_cast<size_t>(N));
      matmul(x.data() + size_t(m) * K, 1, w, one.data(), &pool1);
      ASSERT_EQ(0, std::memcmp(one.data(), big.data() + size_t(m) * N, sizeof(float) * N))
          << wtype_name(t) << " row " << m;
    }
    // A batch of 5 starting mid-way, as a speculative verify would run.
    std::vector<float> five(size_t(5) * N);
    matmul(x.data() + size_t(11) * K, 5, w, five.data(), &pool2);
    ASSERT_EQ(0, std::memcmp(five.data(), big.data() + size_t(11) * N, sizeof(float) * 5 * N)) << wtype_name(t);
  }
}

TEST(Quantize, RoundTripErrorWithinFormatBounds) {
  const int K = 256;
  auto wf = randn(K, 3);
  for (WType t : kAllTypes) {
    WeightMatrix w = make_weight_matrix(wf.data(), 1, K, t);
    std::vector<float> back(K);
    dequantize_row(w, 0, back.data());
    for (int b = 0; b < K / 32; ++b) {
      float amax = 0;
      for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(wf[size_t(b * 32 + i)]));
      // Q8_0: half a step of amax/127; Q4_0: a step of amax/8 (the scale is rounded to fp16).
      const float bound = t == WType::Q8_0 ? amax / 127 * 0.51f + 1e-3f * amax
                          : t == WType::Q4_0 ? amax / 8 * 1.01f
                          : t == WType::F32  ? 0.0f
                          : t == WType::F16  ? amax * 1e-3f
                                             : amax * 8e-3f;
      for (int i = 0; i < 32; ++i)
        ASSERT_LE(std::fabs(back[size_t(b * 32 + i)] - wf[size_t(b * 32 + i)]), bound) << wtype_name(t);
    }
  }
}

TEST(Attention, FastMatchesReferenceAndIsRowIndependent) {
  ThreadPool pool(2);
  const int n_heads = 8, n_kv = 2, hd = 64, cap = 80, nq = 7;
  auto q = randn(size_t(nq) * n_heads * hd, 11);
  auto kc = randn(size_t(n_kv) * cap * hd, 12);
  auto vc = randn(size_t(n_kv) * cap * hd, 13);
  std::vector<int> kb(nq, 0), ke(nq);
  for (int i = 0; i < nq; ++i) ke[size_t(i)] = 60 + i;
  kb[3] = 10;  // a window that does not start at 0 (sliding-window layers)
  std::vector<float> of(size_t(nq) * n_heads * hd), orf(of.size());
  AttentionArgs a{q.data(), nq, n_heads, n_kv, hd, kc.data(), vc.data(), cap, kb.data(), ke.data(), 0.125f, of.data()};
  attention(a, &pool);
  a.out = orf.data();
  ref::attention(a);
  for (size_t i = 0; i < of.size(); ++i) ASSERT_NEAR(of[i], orf[i], 1e-5) << i;
  // Row 4 alone gives the bits it got inside the batch.
  std::vector<float> one(size_t(n_heads) * hd);
  AttentionArgs b{q.data() + size_t(4) * n_heads * hd, 1, n_heads, n_kv, hd, kc.data(), vc.data(), cap,
                  kb.data() + 4, ke.data() + 4, 0.125f, one.data()};
  attention(b, nullptr);
  ASSERT_EQ(0, std::memcmp(one.data(), of.data() + size_t(4) * n_heads * hd, sizeof(float) * one.size()));
}
