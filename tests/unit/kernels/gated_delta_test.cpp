// The Gated DeltaNet kernels (kernels/gated_delta.h): the fast recurrence equals its plain twin
// bit for bit on every shape, rows one at a time equal rows all at once (batch invariance),
// threads change nothing, the math matches an independent double-precision formulation
// (S_t = alpha (I - beta k k^T) S_{t-1} + beta k v^T), and the convolution with its rolled
// state gives the same bits in any split of the rows.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/backend.h"
#include "kernels/fixed_exp.h"
#include "kernels/gated_delta.h"
#include "kernels/kernels.h"
#include "kernels/vector_ops.h"
#include "util/thread_pool.h"

using namespace dflash;

namespace {

std::vector<float> randn(size_t n, uint64_t seed, float sd = 1.0f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.0f, sd);
  std::vector<float> v(n);
  for (auto& x : v) x = nd(rng);
  return v;
}

struct Case {
  int rows, nk, nv, dk, dv;
};

struct Inputs {
  Case c;
  std::vector<float> qkv, b, a, z, neg_a, dt, norm, state;
  explicit Inputs(Case cs, uint64_t seed) : c(cs) {
    const int C = 2 * c.nk * c.dk + c.nv * c.dv;
    qkv = randn(size_t(c.rows) * C, seed);
    b = randn(size_t(c.rows) * c.nv, seed + 1);
    a = randn(size_t(c.rows) * c.nv, seed + 2);
    z = randn(size_t(c.rows) * c.nv * c.dv, seed + 3);
    neg_a = randn(size_t(c.nv), seed + 4, 0.3f);
    for (auto& x : neg_a) x = -std::exp(x);
    dt = randn(size_t(c.nv), seed + 5, 0.5f);
    norm = randn(size_t(c.dv), seed + 6, 0.1f);
    for (auto& x : norm) x += 1.0f;
    state = randn(size_t(c.nv) * c.dk * c.dv, seed + 7, 0.2f);
  }
  GatedDeltaArgs args(int row0, int rows, const float* s_in, float* s_out, float* out) const {
    const int C = 2 * c.nk * c.dk + c.nv * c.dv;
    return GatedDeltaArgs{qkv.data() + size_t(row0) * C, b.data() + size_t(row0) * c.nv,
                          a.data() + size_t(row0) * c.nv, z.data() + size_t(row0) * c.nv * c.dv,
                          rows, c.nk, c.nv, c.dk, c.dv, neg_a.data(), dt.data(), norm.data(), 1e-6f,
                          s_in, s_out, out ? out + size_t(row0) * c.nv * c.dv : nullptr};
  }
};

// dv picks the fast kernel's column block (8, 4, 2 or 1 vectors, or none: dv 20).
const Case kCases[] = {{5, 2, 6, 128, 128}, {17, 2, 4, 32, 48}, {1, 4, 4, 64, 64}, {9, 1, 3, 16, 20}, {11, 1, 2, 24, 32}};

}  // namespace

TEST(GatedDelta, FastEqualsReferenceBitForBit) {
  ThreadPool pool(2);
  for (const Case& c : kCases) {
    Inputs in(c, 11);
    const size_t on = size_t(c.rows) * c.nv * c.dv;
    std::vector<float> s_ref(in.state.size()), s_fast(in.state.size()), o_ref(on), o_fast(on);
    ref::gated_delta_net(in.args(0, c.rows, in.state.data(), s_ref.data(), o_ref.data()));
    gated_delta_net(in.args(0, c.rows, in.state.data(), s_fast.data(), o_fast.data()), &pool);
    ASSERT_EQ(0, std::memcmp(s_ref.data(), s_fast.data(), s_ref.size() * 4)) << "state, dk " << c.dk;
    ASSERT_EQ(0, std::memcmp(o_ref.data(), o_fast.data(), on * 4)) << "readout, dv " << c.dv;
    // Without a readout the state is the same.
    std::vector<float> s_only(in.state.size());
    gated_delta_net(in.args(0, c.rows, in.state.data(), s_only.data(), nullptr), nullptr);
    ASSERT_EQ(0, std::memcmp(s_ref.data(), s_only.data(), s_ref.size() * 4));
  }
}

TEST(GatedDelta, RowsOneAtATimeEqualAllAtOnceInPlaceOrNot) {
  ThreadPool pool(2);
  for (const Case& c : kCases) {
    Inputs in(c, 21);
    const size_t on = size_t(c.rows) * c.nv * c.dv;
    std::vector<float> s_all(in.state.size()), o_all(on), o_step(on);
    gated_delta_net(in.args(0, c.rows, in.state.data(), s_all.data(), o_all.data()), &pool);
    std::vector<float> s = in.state;  // in place, one row per call, one thread
    for (int t = 0; t < c.rows; ++t) gated_delta_net(in.args(t, 1, s.data(), s.data(), o_step.data()), nullptr);
    ASSERT_EQ(0, std::memcmp(s_all.data(), s.data(), s.size() * 4));
    ASSERT_EQ(0, std::memcmp(o_all.data(), o_step.data(), on * 4));
  }
}

// Quiet rows (the rows a rollback left pending, run first by the next forward) are ordinary
// rows without a readout: every placement of the states gives the bits of two separate calls,
// for the fast kernel and its twin alike.
TEST(GatedDelta, QuietRowsGiveTheBitsOfTwoCalls) {
  ThreadPool pool(2);
  for (const Case& c : kCases) {
    for (int quiet : {0, 1, c.rows / 2, c.rows}) {
      Inputs in(c, 61 + uint64_t(quiet));
      const int loud = c.rows - quiet;
      const size_t S = in.state.size(), on = size_t(loud) * c.nv * c.dv;
      // Two calls: the quiet rows (state only), then the rest with its readout.
      std::vector<float> mid(S), fin(S), o_two(size_t(c.rows) * c.nv * c.dv + 1);
      ref::gated_delta_net(in.args(0, quiet, in.state.data(), mid.data(), nullptr));
      ref::gated_delta_net(in.args(quiet, loud, mid.data(), fin.data(), o_two.data()));
      for (int fast = 0; fast < 2; ++fast) {
        auto run = [&](GatedDeltaArgs g) {
          if (fast) gated_delta_net(g, &pool);
          else ref::gated_delta_net(g);
        };
        auto one = [&](const float* s_in, float* s_mid, float* s_out, float* o) {
          GatedDeltaArgs g = in.args(0, c.rows, s_in, s_out, nullptr);
          g.z = in.z.data() + size_t(quiet) * c.nv * c.dv;  // z and out start at the first loud row
          g.out = o;
          g.quiet = quiet;
          g.state_mid = s_mid;
          return run(g);
        };
        // A verify: the state after the quiet rows kept in place, the final one not kept.
        const float* o_want = o_two.data() + size_t(quiet) * c.nv * c.dv;  // args() placed it at row `quiet`
        std::vector<float> s = in.state, o(on + 1);
        one(s.data(), s.data(), nullptr, loud ? o.data() : nullptr);
        ASSERT_EQ(0, std::memcmp(mid.data(), s.data(), S * 4)) << "mid in place, quiet " << quiet;
        ASSERT_EQ(0, std::memcmp(o_want, o.data(), on * 4)) << "readout, quiet " << quiet;
        // Any other forward: all rows in place.
        s = in.state;
        one(s.data(), nullptr, s.data(), loud ? o.data() : nullptr);
        ASSERT_EQ(0, std::memcmp(fin.data(), s.data(), S * 4)) << "end in place, quiet " << quiet;
        ASSERT_EQ(0, std::memcmp(o_want, o.data(), on * 4));
        // Both states, out of place.
        std::vector<float> m2(S, -1.0f), f2(S, -1.0f);
        one(in.state.data(), m2.data(), f2.data(), nullptr);
        ASSERT_EQ(0, std::memcmp(mid.data(), m2.data(), S * 4)) << "fast " << fast << " quiet " << quiet;
        ASSERT_EQ(0, std::memcmp(fin.data(), f2.data(), S * 4)) << "fast " << fast << " quiet " << quiet;
      }
    }
  }
}

TEST(GatedDelta, MatchesTheClosedFormInDouble) {
  const Case c{6, 2, 4, 16, 8};
  Inputs in(c, 31);
  const int C = 2 * c.nk * c.dk + c.nv * c.dv, r = c.nv / c.nk;
  std::vector<float> s(in.state.size()), o(size_t(c.rows) * c.nv * c.dv);
  ref::gated_delta_net(in.args(0, c.rows, in.state.data(), s.data(), o.data()));
  std::vector<double> S(in.state.begin(), in.state.end());
  double max_err = 0, max_o = 0;
  for (int t = 0; t < c.rows; ++t)
    for (int h = 0; h < c.nv; ++h) {
      const float* row = in.qkv.data() + size_t(t) * C;
      const int kh = h / r;  // grouped: value head h reads key head h / r
      std::vector<double> q(c.dk), k(c.dk), v(c.dv), y(c.dv);
      double nq = 0, nk = 0;
      for (int i = 0; i < c.dk; ++i) {
        q[i] = row[kh * c.dk + i];
        k[i] = row[(c.nk + kh) * c.dk + i];
        nq += q[i] * q[i];
        nk += k[i] * k[i];
      }
      for (int i = 0; i < c.dk; ++i) {
        q[i] /= std::sqrt(nq + 1e-6) * std::sqrt(double(c.dk));
        k[i] /= std::sqrt(nk + 1e-6);
      }
      for (int j = 0; j < c.dv; ++j) v[j] = row[2 * c.nk * c.dk + h * c.dv + j];
      const double beta = 1 / (1 + std::exp(-double(in.b[t * c.nv + h])));
      const double x = double(in.a[t * c.nv + h]) + in.dt[h];
      const double alpha = std::exp(double(in.neg_a[h]) * (x > 20 ? x : std::log1p(std::exp(x))));
      double* Sh = S.data() + size_t(h) * c.dk * c.dv;
      // S' = alpha (I - beta k k^T) S + beta k v^T
      std::vector<double> kS(c.dv, 0.0);
      for (int i = 0; i < c.dk; ++i)
        for (int j = 0; j < c.dv; ++j) kS[j] += k[i] * Sh[i * c.dv + j];
      for (int i = 0; i < c.dk; ++i)
        for (int j = 0; j < c.dv; ++j)
          Sh[i * c.dv + j] = alpha * (Sh[i * c.dv + j] - beta * k[i] * kS[j]) + beta * k[i] * v[j];
      double ss = 0;
      for (int j = 0; j < c.dv; ++j) {
        y[j] = 0;
        for (int i = 0; i < c.dk; ++i) y[j] += Sh[i * c.dv + j] * q[i];
        ss += y[j] * y[j];
      }
      for (int j = 0; j < c.dv; ++j) {
        const double zz = in.z[(size_t(t) * c.nv + h) * c.dv + j];
        const double want = in.norm[j] * y[j] / std::sqrt(ss / c.dv + 1e-6) * zz / (1 + std::exp(-zz));
        max_err = std::max(max_err, std::abs(want - o[(size_t(t) * c.nv + h) * c.dv + j]));
        max_o = std::max(max_o, std::abs(want));
      }
    }
  for (size_t i = 0; i < S.size(); ++i) EXPECT_NEAR(S[i], s[i], 1e-5 * (1 + std::abs(S[i])));
  EXPECT_LT(max_err, 1e-5 * max_o);
  EXPECT_GT(max_o, 0.1);
}

TEST(GatedDelta, ConvolutionFollowsItsDefinitionInAnySplit) {
  const int rows = 11, C = 24, K = 4;
  auto in = randn(size_t(rows) * C, 41), w = randn(size_t(C) * K, 42), st0 = randn(size_t(K - 1) * C, 43);
  std::vector<float> all(size_t(rows) * C);
  causal_conv_silu({in.data(), rows, C, K, w.data(), st0.data(), all.data()});
  for (int t = 0; t < rows; ++t)
    for (int c = 0; c < C; ++c) {
      double s = 0;
      for (int j = 0; j < K; ++j) {
        const int u = t - (K - 1) + j;
        s += double(w[c * K + j]) * (u >= 0 ? in[u * C + c] : st0[(K - 1 + u) * C + c]);
      }
      ASSERT_NEAR(s / (1 + std::exp(-s)), all[t * C + c], 1e-5);
    }
  for (int split : {1, 2, 3, 7}) {  // chunks of `split` rows, the state rolled in place between them
    std::vector<float> st = st0, out(all.size());
    for (int t0 = 0; t0 < rows; t0 += split) {
      const int n = std::min(split, rows - t0);
      causal_conv_silu({in.data() + t0 * C, n, C, K, w.data(), st.data(), out.data() + t0 * C});
      roll_conv_state(st.data(), in.data() + t0 * C, n, C, K, st.data());
    }
    ASSERT_EQ(0, std::memcmp(all.data(), out.data(), all.size() * 4)) << "split " << split;
    for (int r = 0; r < K - 1; ++r)  // the state ends as the last K-1 inputs
      ASSERT_EQ(0, std::memcmp(st.data() + r * C, in.data() + (rows - (K - 1) + r) * C, C * 4));
  }
}

// The fixed exp (kernels/fixed_exp.h): SIMD and scalar forms give the same bits on every
// input class (a sweep over the range, the clamps, infinities, NaN), and it is exp to 1e-6.
TEST(GatedDelta, FixedExpSimdEqualsScalarAndIsExp) {
  std::vector<float> x;
  for (float v = -100.0f; v <= 100.0f; v += 0.0137f) x.push_back(v);
  for (float v : {0.0f, -0.0f, -87.0f, 88.0f, 1e-30f, -1e-30f, 87.99f, -86.99f, 1e30f, -1e30f}) x.push_back(v);
  x.push_back(INFINITY);
  x.push_back(-INFINITY);
  x.push_back(NAN);
  std::vector<float> y(x.size());
  fixed_exp_row(x.data(), int(x.size()), y.data());
  double worst = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const float s = fixed_exp::exp(x[i]);
    ASSERT_EQ(0, std::memcmp(&s, &y[i], 4)) << "x = " << x[i];
    const double xc = std::min(88.0, std::max(-87.0, double(x[i])));
    if (!std::isnan(x[i])) worst = std::max(worst, std::abs(double(s) / std::exp(xc) - 1.0));
  }
  EXPECT_LT(worst, 1e-6);
  EXPECT_EQ(1.0f, fixed_exp::exp(0.0f));
}

// The SIMD convolution equals its plain twin bit for bit: four taps (the vector path, channel
// counts with and without a remainder) and other tap counts (the scalar path).
TEST(GatedDelta, ConvolutionFastEqualsReferenceBitForBit) {
  for (int K : {4, 3, 2})
    for (int C : {64, 100, 7})
      for (int rows : {1, 5}) {
        auto in = randn(size_t(rows) * C, 71, 3.0f), w = randn(size_t(C) * K, 72), st = randn(size_t(K - 1) * C, 73, 3.0f);
        std::vector<float> fast(size_t(rows) * C), plain(fast.size());
        causal_conv_silu({in.data(), rows, C, K, w.data(), st.data(), fast.data()});
        ref::causal_conv_silu({in.data(), rows, C, K, w.data(), st.data(), plain.data()});
        ASSERT_EQ(0, std::memcmp(fast.data(), plain.data(), fast.size() * 4)) << "K " << K << " C " << C;
      }
}

TEST(GatedDelta, PartialRopeOnAllDimsIsFullRope) {
  const int rows = 3, heads = 2, hd = 16;
  auto x = randn(size_t(rows) * heads * hd, 51), cs = randn(size_t(rows) * hd / 2, 52), sn = randn(size_t(rows) * hd / 2, 53);
  auto a = x, b = x;
  rope_neox(a.data(), rows, heads, hd, cs.data(), sn.data());
  rope_neox_partial_rows(b.data(), rows, heads, hd, hd, cs.data(), sn.data());
  ASSERT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * 4));
  // rot 8 of 16: dims 8..15 untouched, pairs (i, i+4) rotated with the first 4 table columns.
  std::vector<float> c4(size_t(rows) * 4), s4(size_t(rows) * 4);
  for (int r = 0; r < rows; ++r)
    for (int i = 0; i < 4; ++i) c4[r * 4 + i] = cs[r * 8 + i], s4[r * 4 + i] = sn[r * 8 + i];
  auto p = x;
  rope_neox_partial_rows(p.data(), rows, heads, hd, 8, c4.data(), s4.data());
  for (int r = 0; r < rows; ++r)
    for (int h = 0; h < heads; ++h) {
      const float* v = x.data() + (r * heads + h) * hd;
      const float* o = p.data() + (r * heads + h) * hd;
      for (int i = 8; i < hd; ++i) ASSERT_EQ(v[i], o[i]);
      for (int i = 0; i < 4; ++i) {
        ASSERT_EQ(v[i] * c4[r * 4 + i] - v[i + 4] * s4[r * 4 + i], o[i]);
        ASSERT_EQ(v[i + 4] * c4[r * 4 + i] + v[i] * s4[r * 4 + i], o[i + 4]);
      }
    }
  auto g = randn(10, 54), y = randn(10, 55), yy = y;
  sigmoid_gate_rows(yy.data(), g.data(), 10);
  for (int i = 0; i < 10; ++i) ASSERT_NEAR(y[i] / (1 + std::exp(-double(g[i]))), yy[i], 1e-6);
}
