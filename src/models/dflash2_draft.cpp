// The DFlash2 block: v1's layers with the convolutions hooked around each sublayer, then the
// candidate selector's walk over the top-k of every row.
#include "models/dflash2_draft.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "kernels/kernels.h"
#include "util/error.h"
#include "util/timer.h"

namespace dflash {

void DFlash2Draft::sublayer_in(int l, int sub, float* h, int B, std::vector<float>& dyn, ThreadPool* pool) const {
  const double t0 = now_seconds();
  const Conv& cv = convs_[size_t(l * 2 + sub)];
  // One projection of the normed input gives the dynamic taps of both sides.
  dyn.resize(size_t(B) * size_t(cv.projection.rows));
  matmul(h, B, cv.projection, dyn.data(), pool);
  conv(l, sub, 0, h, B, dyn);
  timing_.conv_s += now_seconds() - t0;
}

void DFlash2Draft::sublayer_out(int l, int sub, float* o, int B, const std::vector<float>& dyn) const {
  const double t0 = now_seconds();
  conv(l, sub, 1, o, B, dyn);
  timing_.conv_s += now_seconds() - t0;
}

// out[t,c] = sum_tap (base[side][tap][c] + dyn[t][(side*K + tap)*G + c/group]) * x[t-tap][c],
// over taps with t-tap inside the block: the anchor (t = 0) sees only itself.
void DFlash2Draft::conv(int l, int sub, int side, float* x, int B, const std::vector<float>& dyn) const {
  const Conv& cv = convs_[size_t(l * 2 + sub)];
  const int H = cfg_.hidden, K = cfg2_.conv_kernel, gs = cfg2_.conv_group, G = H / gs;
  const size_t dyn_row = size_t(2) * K * G;
  std::vector<float> in(x, x + size_t(B) * H);
  for (int t = 0; t < B; ++t) {
    const float* dt = dyn.data() + size_t(t) * dyn_row + size_t(side) * K * G;
    float* out = x + size_t(t) * H;
    for (int c = 0; c < H; ++c) {
      float acc = 0;
      for (int tap = 0; tap < K && tap <= t; ++tap)
        acc += (cv.base[(size_t(side) * K + tap) * H + c] + dt[size_t(tap) * G + c / gs]) *
               in[size_t(t - tap) * H + c];
      out[c] = acc;
    }
  }
}

void DFlash2Draft::finish_logits(float* logits, size_t n) const {
  const float m = cfg2_.output_multiplier, cap = cfg2_.softcap;
  if (m != 1.0f)
    for (size_t i = 0; i < n; ++i) logits[i] *= m;
  if (cap > 0)
    for (size_t i = 0; i < n; ++i) logits[i] = cap * std::tanh(logits[i] / cap);
}

void DFlash2Draft::propose(KVCache& cache, int32_t first, int B, float* logits, ThreadPool* pool) const {
  std::vector<float> normed(size_t(B - 1) * cfg_.hidden);
  block_hidden(cache, first, B, normed.data(), pool);
  matmul(normed.data(), B - 1, target_->lm_head(), logits, pool);
  finish_logits(logits, size_t(B - 1) * cfg_.vocab);
}

void DFlash2Draft::draft_block(KVCache& cache, int32_t first, int B, float temperature, const double* uniforms,
                               float* normed, float* logits, DraftTokens& out, ThreadPool* pool) const {
  const double t0 = now_seconds();
  block_hidden(cache, first, B, normed, pool);
  matmul(normed, B - 1, target_->lm_head(), logits, pool);
  const size_t n = size_t(B - 1) * cfg_.vocab;
  finish_logits(logits, n);
  out = DraftTokens{};
  out.finite = std::all_of(logits, logits + n, [](float v) { return std::isfinite(v); }) &&
               std::all_of(normed, normed + size_t(B - 1) * cfg_.hidden, [](float v) { return std::isfinite(v); });
  if (out.finite) select(first, normed, logits, B - 1, temperature, uniforms, out, pool);
  timing_.total_s += now_seconds() - t0;
  ++timing_.blocks;
}

void DFlash2Draft::propose_tokens(KVCache& cache, int32_t first, int B, float temperature, const double* uniforms,
                                  DraftTokens& out, ThreadPool* pool) const {
  std::vector<float> normed(size_t(B - 1) * cfg_.hidden), logits(size_t(B - 1) * cfg_.vocab);
  draft_block(cache, first, B, temperature, uniforms, normed.data(), logits.data(), out, pool);
}

void DFlash2Draft::select(int32_t anchor, const float* normed, const float* logits, int rows, float temperature,
                          const double* uniforms, DraftTokens& out, ThreadPool* pool) const {
  const double t0 = now_seconds();
  const int V = cfg_.vocab, R = cfg2_.selector_rank, k = cfg2_.selector_top_k;
  // Candidates: descending logit, ascending id on equal logits.
  std::vector<int32_t> cand(size_t(rows) * k), idx(static_cast<size_t>(V));
  for (int t = 0; t < rows; ++t) {
    const float* l = logits + size_t(t) * V;
    std::iota(idx.begin(), idx.end(), 0);
    std::partial_sort(idx.begin(), idx.begin() + k, idx.end(),
                      [&](int32_t a, int32_t b) { return l[a] > l[b] || (l[a] == l[b] && a < b); });
    std::copy(idx.begin(), idx.begin() + k, cand.begin() + size_t(t) * k);
  }
  std::vector<float> hp(size_t(rows) * R);
  matmul(normed, rows, hidden_projection_, hp.data(), pool);
  // Edge scores of every position at once: row t's predecessor is the anchor (t = 0) or one
  // of row t-1's candidates, so edge[t][i][j] = <pred[prev_i] * hp[t], succ[cand[t][j]]>
  // covers every walk. Only these codebook rows are read.
  auto row_of = [&](const WeightMatrix& w, int32_t id, std::vector<float>& buf) {
    buf.resize(size_t(R));
    dequantize_row(w, id, buf.data());
  };
  std::vector<float> succ(size_t(rows) * k * R), pred(static_cast<size_t>(R)), w(static_cast<size_t>(R));
  for (int t = 0; t < rows; ++t)
    for (int j = 0; j < k; ++j) dequantize_row(successor_, cand[size_t(t) * k + j], succ.data() + (size_t(t) * k + j) * R);
  const int preds = k;  // predecessors per row (row 0 uses slot 0 for the anchor)
  std::vector<float> edge(size_t(rows) * preds * k);
  for (int t = 0; t < rows; ++t) {
    const int np = t == 0 ? 1 : k;
    for (int i = 0; i < np; ++i) {
      row_of(predecessor_, t == 0 ? anchor : cand[size_t(t - 1) * k + i], pred);
      const float* h = hp.data() + size_t(t) * R;
      for (int r = 0; r < R; ++r) w[size_t(r)] = pred[size_t(r)] * h[r];
      for (int j = 0; j < k; ++j) {
        const float* s = succ.data() + (size_t(t) * k + j) * R;
        float acc = 0;
        for (int r = 0; r < R; ++r) acc += w[size_t(r)] * s[r];
        edge[(size_t(t) * preds + i) * k + j] = acc;
      }
    }
  }
  // The walk: greedy (ties to the lowest candidate index) or one draw per row.
  out.tokens.assign(size_t(rows), 0);
  if (temperature > 0) {
    out.cand.assign(size_t(rows), {});
    out.q.assign(size_t(rows), {});
  }
  std::vector<double> score(static_cast<size_t>(k));
  int prev = 0;
  for (int t = 0; t < rows; ++t) {
    const float* l = logits + size_t(t) * V;
    const float* e = edge.data() + (size_t(t) * preds + prev) * k;
    for (int j = 0; j < k; ++j) score[size_t(j)] = double(l[cand[size_t(t) * k + j]]) + double(e[j]);
    int pick = 0;
    if (temperature <= 0) {
      for (int j = 1; j < k; ++j)
        if (score[size_t(j)] > score[size_t(pick)]) pick = j;
    } else {
      const double mx = *std::max_element(score.begin(), score.end());
      std::vector<double> pr(static_cast<size_t>(k));
      double sum = 0;
      for (int j = 0; j < k; ++j) sum += (pr[size_t(j)] = std::exp((score[size_t(j)] - mx) / double(temperature)));
      const double u = uniforms[t];
      double cum = 0;
      pick = 0;
      for (int j = 0; j < k; ++j) {
        if (pr[size_t(j)] <= 0) continue;
        cum += pr[size_t(j)] / sum;
        pick = j;  // rounding can leave cum just under 1: the last candidate with mass
        if (u < cum) {
          pick = j;
          break;
        }
      }
      out.cand[size_t(t)].assign(cand.begin() + size_t(t) * k, cand.begin() + size_t(t + 1) * k);
      for (int j = 0; j < k; ++j) out.q[size_t(t)].push_back(float(pr[size_t(j)] / sum));
    }
    out.tokens[size_t(t)] = cand[size_t(t) * k + pick];
    prev = pick;
  }
  timing_.selector_s += now_seconds() - t0;
}

}  // namespace dflash
