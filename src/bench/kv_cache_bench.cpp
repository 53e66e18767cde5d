// dflash bench --cache-type f32,q8,q4 --context N: decode tok/s per KV cache format.
#include "bench/kv_cache_bench.h"

#include <cstdio>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>

#include "bench/model_speed.h"
#include "kernels/kernels.h"
#include "models/kv_cache.h"
#include "util/timer.h"

namespace dflash::bench {

std::vector<KvBenchRow> run_kv_bench(const std::string& label, const TargetModel& m,
                                     const std::vector<std::string>& cache_types, int context, int gen_tokens,
                                     int rounds, ThreadPool& pool) {
  const ModelConfig& c = m.config();
  const int kvd = c.n_kv_heads * c.head_dim, fill = 256;
  std::vector<KVCache> caches;
  for (const auto& name : cache_types) {
    caches.emplace_back(c.n_layers, c.n_kv_heads, c.head_dim, context + gen_tokens, parse_kv_type(name));
    KVCache& kv = caches.back();
    std::mt19937 rng(17);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> k(size_t(fill) * kvd), v(k.size());
    for (int l = 0; l < c.n_layers; ++l)
      for (int pos = 0; pos < context; pos += fill) {
        for (auto& x : k) x = nd(rng);
        for (auto& x : v) x = nd(rng);
        kv.store(l, k.data(), v.data(), pos, std::min(fill, context - pos));
      }
  }
  std::vector<double> best(caches.size(), std::numeric_limits<double>::infinity());
  std::vector<float> logits(size_t(c.vocab));
  for (int r = 0; r < rounds; ++r)
    for (size_t t = 0; t < caches.size(); ++t) {
      KVCache& kv = caches[t];
      kv.set_length(context);
      const double t0 = now_seconds();
      for (int s = 0; s < gen_tokens; ++s) {
        const int32_t tok = int32_t((s * 7919 + 13) % c.vocab);
        ForwardArgs a;
        a.tokens = &tok;
        a.n = 1;
        a.logits = logits.data();
        m.forward(kv, a);
      }
      best[t] = std::min(best[t], now_seconds() - t0);
    }
  std::vector<KvBenchRow> rows;
  for (size_t t = 0; t < caches.size(); ++t) {
    KvBenchRow row;
    row.model = label;
    row.weights = wtype_name(m.weight_type());
    row.cache = wtype_name(caches[t].type());
    row.context = context;
    row.kv_mib = double(caches[t].bytes()) / (1 << 20);
    row.decode_tok_s = gen_tokens / best[t];
    rows.push_back(row);
  }
  return rows;
}

void print_kv_bench(const std::vector<KvBenchRow>& rows, bool json, int threads) {
  if (json) {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& r : rows)
      j.push_back({{"model", r.model}, {"weights", r.weights}, {"cache_type", r.cache}, {"context", r.context},
                   {"threads", threads}, {"kv_mib", r.kv_mib}, {"decode_tok_s", r.decode_tok_s}});
    std::puts(j.dump(2).c_str());
    return;
  }
  std::printf("%-14s %-6s %-6s %8s %10s %12s %8s\n", "model", "format", "cache", "context", "KV MiB", "decode t/s",
              "vs f32");
  double base = 0;
  std::string base_key;
  for (const auto& r : rows) {
    const std::string key = r.model + "/" + r.weights;
    if (r.cache == "f32") base = r.decode_tok_s, base_key = key;
    const bool have = base > 0 && base_key == key;
    std::printf("%-14s %-6s %-6s %8d %10.1f %12.2f", r.model.c_str(), r.weights.c_str(), r.cache.c_str(), r.context,
                r.kv_mib, r.decode_tok_s);
    if (have) std::printf(" %+7.1f%%\n", (r.decode_tok_s / base - 1) * 100);
    else std::printf(" %8s\n", "-");
  }
}

void run_kv_cache_bench(const KvCacheBenchOptions& o) {
  ThreadPool pool(o.threads > 0 ? o.threads : default_thread_count());
  std::fprintf(stderr, "threads %d, SIMD %s\n", pool.size(), simd_target_name());
  const auto backend = make_cpu_backend(pool.size());
  std::vector<KvBenchRow> rows;
  for (const auto& wname : o.weights)
    for (const auto& s : o.shapes) {
      auto m = random_model(shape_config(s), parse_wtype(wname), 1, backend);
      const auto r = run_kv_bench(s, *m, o.cache_types, o.context, o.gen_tokens, o.rounds, pool);
      rows.insert(rows.end(), r.begin(), r.end());
    }
  print_kv_bench(rows, o.json, pool.size());
}

}  // namespace dflash::bench
