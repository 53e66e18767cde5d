#pragma once
// dflash bench --cache-type: decode speed per KV cache format at a long context.
#include <string>
#include <vector>

#include "models/dense/dense_model.h"
#include "util/thread_pool.h"

namespace dflash::bench {

struct KvBenchRow {
  std::string model, weights, cache;
  int context = 0;
  double kv_mib = 0, decode_tok_s = 0;
};

// Decode speed of `m` at `context` tokens of context for each KV cache format, side by side:
// caches are filled with random keys/values (a prefill of that length would dominate the
// run and does not change what a decode step reads), then the formats take turns for
// `rounds` rounds of `gen_tokens` steps each; the best round of each is kept.
std::vector<KvBenchRow> run_kv_bench(const std::string& label, const TargetModel& m,
                                     const std::vector<std::string>& cache_types, int context, int gen_tokens,
                                     int rounds, ThreadPool& pool);
void print_kv_bench(const std::vector<KvBenchRow>& rows, bool json, int threads);

// dflash bench --cache-type: run_kv_bench on every random-weight shape in every weight format,
// then print_kv_bench.
struct KvCacheBenchOptions {
  std::vector<std::string> shapes, weights, cache_types;
  int threads = 0, context = 4096, gen_tokens = 64, rounds = 3;
  bool json = false;
};
void run_kv_cache_bench(const KvCacheBenchOptions& o);

}  // namespace dflash::bench
