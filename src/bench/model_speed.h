#pragma once
// The speed of one model, shared by every bench mode: the random model shapes, the verify cost
// curve's batch sizes, and the measurement of one model (model_speed.cpp).
#include <memory>
#include <string>
#include <vector>

#include "kernels/weight_matrix.h"
#include "models/model_config.h"
#include "models/dense/dense_model.h"
#include "models/model_pair.h"
#include "util/thread_pool.h"

namespace dflash::bench {

// qwen2.5-0.5b, qwen2.5-1.5b, qwen3-1.7b, tiny (dense); qwen3.5-0.8b, qwen3.5-2b, qwen3.5-4b,
// qwen3.5-tiny (hybrid); throws dflash::Error for other names.
ModelConfig shape_config(const std::string& name);
// A random-weight model of a shape, of the family its config names (hybrid when any layer is
// linear attention).
std::unique_ptr<TargetModel> random_model(const ModelConfig& c, WType weights, uint64_t seed,
                                          std::shared_ptr<Backend> backend);
// Bytes of one copy of a hybrid's conv and recurrent states (0 for a dense model).
size_t recurrent_state_bytes(const ModelConfig& c);
// Bytes of attention KV cache per position (only a hybrid's full-attention layers have one).
double kv_bytes_per_position(const TargetModel& m);

// A model folder or GGUF (resolved as the commands resolve --model) and its draft (may be
// empty), every page read at load so the first timed step does not pay for it.
// cache_type: the target's KV cache (the server's default f32; `--cache-type` there).
ModelPair load_bench_pair(const std::string& model, const std::string& draft, const std::string& weights, int threads,
                          WType cache_type = WType::F32);

// Batch sizes of the verification cost curve (forward of K tokens).
inline const std::vector<int>& curve_k() {
  static const std::vector<int> k{1, 2, 4, 5, 8, 16, 32};
  return k;
}

// Each point of the curve is the median of this many forwards after a warm-up, in both engines
// (the same statistic on both sides): a ratio such as K=16 / K=1 takes the noise of both
// points, and one forward takes only milliseconds.
constexpr int kCurveReps = 5;

struct BenchRow {
  std::string model, weights;
  double prefill_tok_s = 0, decode_tok_s = 0, weight_gb = 0, roof = 0;
  // KV cache bytes a decode step reads (every layer's keys and values up to its position),
  // averaged over the decoded positions: with 8 kv heads of 128 (Qwen3-1.7B) and an f16 cache
  // at 512-640 tokens of context that is 7% of the Q4_0 weights' bytes.
  double kv_gb = 0;
  double bandwidth = 0;  // bytes/s this row's roof and bounds are held against
  double peak_rss_mb = -1;  // since the caller's reset_peak_rss() before loading; -1 if unknown
  std::vector<double> forward_s, bound_s;  // per curve_k()
  // Hybrids (recurrent state): MiB of state per sequence at the curve's context, and per K of
  // the curve the cost of making a verify block rollbackable (logging its rows) and of rolling
  // back to the middle of the block (the K/2 kept rows the next verify runs first); empty for
  // dense models.
  double state_mib = 0;
  std::vector<double> log_s, rollback_s;
  std::vector<double> snapshot_s;  // the alternative: copying the states after each of K rows
  // Decode's fraction of the bandwidth roof: the bytes a step must read (weights and KV cache)
  // per second over `bw` (bytes/s).
  double roof_against(double bw) const { return (weight_gb + kv_gb) * 1e9 * decode_tok_s / bw; }
};

// int8 multiply-adds/s of the block-quantized kernel on cache-resident weights.
double measure_int8_rate(WType t, ThreadPool& pool);
// Prefill of prompt_tokens, decode of gen_tokens, forward of K tokens after min(prompt, 128)
// tokens of context, decode roof fraction and physical bound per K.
BenchRow bench_one(const std::string& label, const TargetModel& m, int prompt_tokens, int gen_tokens,
                   ThreadPool& pool, double bw, double int8_rate);

}  // namespace dflash::bench
