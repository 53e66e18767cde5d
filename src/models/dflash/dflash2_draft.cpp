// The DFlash2 block: v1's layers with the convolutions hooked around each sublayer, then the
// candidate selector's walk over the top-k of every row.
#include "models/dflash/dflash2_draft.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "util/error.h"
#include "util/timer.h"

namespace dflash {

void DFlash2Draft::sublayer_in(int l, int sub, float* h, const std::vector<Segment>& blocks) const {
  const double t0 = now_seconds();
  const Conv& cv = convs_[size_t(l * 2 + sub)];
  const int rows = blocks.back().off + blocks.back().n;
  // One projection of the normed input gives the dynamic taps of both sides.
  float* dyn = bufs_.dyn.floats(*backend_, size_t(rows) * size_t(cv.projection.rows));
  backend_->matmul(h, rows, cv.projection, dyn);
  conv(l, sub, 0, h, blocks);
  timing_.conv_s += now_seconds() - t0;
}

void DFlash2Draft::sublayer_out(int l, int sub, float* o, const std::vector<Segment>& blocks) const {
  const double t0 = now_seconds();
  conv(l, sub, 1, o, blocks);
  timing_.conv_s += now_seconds() - t0;
}

// Side 0 before the sublayer, side 1 after it; the definition is causal_block_conv's
// (kernels/vector_ops.h) with this side's base taps and dynamic taps.
void DFlash2Draft::conv(int l, int sub, int side, float* x, const std::vector<Segment>& blocks) const {
  const Conv& cv = convs_[size_t(l * 2 + sub)];
  const int H = cfg_.hidden, K = cfg2_.conv_kernel, gs = cfg2_.conv_group, G = H / gs;
  const size_t n = size_t(blocks.back().off + blocks.back().n) * size_t(H), stride = size_t(2) * K * G;
  float* in = bufs_.conv_in.floats(*backend_, n);
  std::memcpy(in, x, n * sizeof(float));
  const float* dyn = bufs_.dyn.floats(*backend_, 0);
  for (const Segment& b : blocks) {
    const size_t o = size_t(b.off);
    BlockConvArgs a{in + o * H, x + o * H, b.n, H, K, gs, cv.base.data() + size_t(side) * K * H,
                    dyn + o * stride + size_t(side) * K * G, stride};
    backend_->causal_block_conv(a);
  }
}

void DFlash2Draft::finish_logits(float* logits, size_t n) const {
  const float m = cfg2_.output_multiplier, cap = cfg2_.softcap;
  if (m != 1.0f) backend_->scale(logits, n, m);
  if (cap > 0) backend_->softcap(logits, n, cap);
}

void DFlash2Draft::propose(SequenceState& state, int32_t first, int B, float* logits) const {
  float* normed = acts_.normed.floats(*backend_, size_t(B - 1) * cfg_.hidden);
  block_hidden(state, first, B, normed);
  target_->lm_head_logits(normed, B - 1, logits);
  finish_logits(logits, size_t(B - 1) * cfg_.vocab);
}

void DFlash2Draft::draft_block(SequenceState& state, int32_t first, int B, float temperature, const double* uniforms,
                               float* normed, float* logits, DraftTokens& out) const {
  const double t0 = now_seconds();
  block_hidden(state, first, B, normed);
  target_->lm_head_logits(normed, B - 1, logits);
  const size_t n = size_t(B - 1) * cfg_.vocab;
  finish_logits(logits, n);
  out = DraftTokens{};
  out.finite = backend_->all_finite(logits, n) && backend_->all_finite(normed, size_t(B - 1) * cfg_.hidden);
  if (out.finite) select(first, normed, logits, B - 1, temperature, uniforms, out);
  timing_.total_s += now_seconds() - t0;
  ++timing_.blocks;
}

void DFlash2Draft::draft_batch(const std::vector<DraftJob*>& jobs) const {
  if (jobs.empty()) return;
  const double t0 = now_seconds();
  const float* normed = nullptr;
  // batch_logits hands out its own buffer; the scaling and softcap are applied in place.
  float* logits = const_cast<float*>(batch_logits(jobs, &normed));
  const double t1 = now_seconds();
  size_t rows = 0;
  for (const DraftJob* j : jobs) rows += size_t(j->B - 1);
  finish_logits(logits, rows * cfg_.vocab);
  const double finish_s = now_seconds() - t1;
  const size_t V = size_t(cfg_.vocab), H = size_t(cfg_.hidden);
  for (DraftJob* j : jobs) {
    const double s0 = now_seconds();
    const size_t m = size_t(j->B - 1);
    DraftTokens& out = *j->tokens;
    out = DraftTokens{};
    out.finite = backend_->all_finite(logits, m * V) && backend_->all_finite(normed, m * H);
    if (out.finite) select(j->first, normed, logits, int(m), j->temperature, j->uniforms, out);
    logits += m * V;
    normed += m * H;
    // The scaling's share by rows, as batch_logits shares the pass; the walk is the job's own.
    j->block_s += finish_s * double(m) / double(rows) + (now_seconds() - s0);
  }
  timing_.total_s += now_seconds() - t0;
  timing_.blocks += long(jobs.size());
}

void DFlash2Draft::propose_tokens(SequenceState& state, int32_t first, int B, float temperature,
                                  const double* uniforms, DraftTokens& out) const {
  float* normed = acts_.normed.floats(*backend_, size_t(B - 1) * cfg_.hidden);
  float* logits = acts_.logits.floats(*backend_, size_t(B - 1) * cfg_.vocab);
  draft_block(state, first, B, temperature, uniforms, normed, logits, out);
}

void DFlash2Draft::select(int32_t anchor, const float* normed, const float* logits, int rows, float temperature,
                          const double* uniforms, DraftTokens& out) const {
  const double t0 = now_seconds();
  const Backend& be = *backend_;
  const int V = cfg_.vocab, R = cfg2_.selector_rank, k = cfg2_.selector_top_k;
  // Candidates: descending logit, ascending id on equal logits.
  int32_t* cand = bufs_.cand.ints(be, size_t(rows) * k);
  be.top_k(logits, rows, V, k, cand);
  float* hp = bufs_.hp.floats(be, size_t(rows) * R);
  be.matmul(normed, rows, hidden_projection_, hp);
  // Edge scores of every position at once: row t's predecessor is the anchor (t = 0) or one
  // of row t-1's candidates, so edge[t][i][j] = <pred[prev_i] * hp[t], succ[cand[t][j]]>
  // covers every walk. Only these codebook rows are read.
  float* succ = bufs_.succ.floats(be, size_t(rows) * k * R);
  float* pred = bufs_.pred.floats(be, size_t(k) * R);
  for (int t = 0; t < rows; ++t)
    for (int j = 0; j < k; ++j) be.dequantize_row(successor_, cand[size_t(t) * k + j], succ + (size_t(t) * k + j) * R);
  const int preds = k;  // predecessors per row (row 0 uses slot 0 for the anchor)
  float* edge = bufs_.edge.floats(be, size_t(rows) * preds * k);
  for (int t = 0; t < rows; ++t) {
    const int np = t == 0 ? 1 : k;
    for (int i = 0; i < np; ++i)
      be.dequantize_row(predecessor_, t == 0 ? anchor : cand[size_t(t - 1) * k + i], pred + size_t(i) * R);
    be.edge_scores({pred, np, hp + size_t(t) * R, succ + size_t(t) * k * R, k, R, edge + size_t(t) * preds * k});
  }
  // The walk: greedy (ties to the lowest candidate index) or one draw per row; a few dozen
  // decisions in double precision, the selector's own logic rather than an op.
  out.tokens.assign(size_t(rows), 0);
  if (temperature > 0) {
    out.cand.assign(size_t(rows), {});
    out.q.assign(size_t(rows), {});
  }
  std::vector<double>& score = bufs_.score;
  std::vector<double>& pr = bufs_.prob;
  score.assign(size_t(k), 0.0);
  int prev = 0;
  for (int t = 0; t < rows; ++t) {
    const float* l = logits + size_t(t) * V;
    const float* e = edge + (size_t(t) * preds + prev) * k;
    for (int j = 0; j < k; ++j) score[size_t(j)] = double(l[cand[size_t(t) * k + j]]) + double(e[j]);
    int pick = 0;
    if (temperature <= 0) {
      for (int j = 1; j < k; ++j)
        if (score[size_t(j)] > score[size_t(pick)]) pick = j;
    } else {
      const double mx = *std::max_element(score.begin(), score.end());
      pr.assign(size_t(k), 0.0);
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
      out.cand[size_t(t)].assign(cand + size_t(t) * k, cand + size_t(t + 1) * k);
      for (int j = 0; j < k; ++j) out.q[size_t(t)].push_back(float(pr[size_t(j)] / sum));
    }
    out.tokens[size_t(t)] = cand[size_t(t) * k + pick];
    prev = pick;
  }
  timing_.selector_s += now_seconds() - t0;
}

}  // namespace dflash
