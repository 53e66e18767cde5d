// dflash bench (its default mode): prefill and decode speed of real model shapes with random
// weights generated in memory (nothing downloaded or committed), or of one model folder,
// decode's fraction of the bandwidth roof, and the time of one forward of K tokens (what a
// speculative verify costs) against its physical bound max(weight bytes / bandwidth,
// multiply-adds / int8 rate), both rates measured in the same run.
#include "bench/speed_bench.h"

#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>

#include "bench/bandwidth.h"
#include "bench/model_speed.h"
#include "kernels/kernels.h"
#include "models/dense/dense_model.h"
#include "util/peak_rss.h"

namespace dflash::bench {

void run_speed_bench(const SpeedBenchOptions& o) {
  const std::vector<int>& ks = curve_k();
  ThreadPool pool(o.threads > 0 ? o.threads : default_thread_count());
  double bw = measure_read_bandwidth(pool);
  std::fprintf(stderr, "threads %d, SIMD %s, measured read bandwidth %.1f GB/s\n", pool.size(), simd_target_name(),
               bw / 1e9);
  const auto backend = make_cpu_backend(pool.size());
  std::map<WType, double> rate;  // int8 multiply-adds/s per block-quantized format
  for (const auto& wname : o.weights) {
    const WType wt = parse_wtype(wname);
    if (uses_int8_path(wt) && !rate.count(wt)) {
      rate[wt] = measure_int8_rate(wt, pool);
      std::fprintf(stderr, "int8 kernel rate %s (%s, cache-resident, 64 rows): %.1f G multiply-adds/s\n",
                   wtype_name(wt), qmatmul_target_name(), rate[wt] / 1e9);
    }
  }
  std::vector<BenchRow> rows;
  for (const auto& wname : o.weights) {
    const WType wt = parse_wtype(wname);
    const double r8 = rate.count(wt) ? rate[wt] : 0.0;
    if (!o.model.empty()) {
      LoadOptions lo;
      lo.weights = wt;
      lo.populate = true;  // page faults are not what we measure
      lo.backend = backend;
      const double bw_now = remeasure_read_bandwidth(pool, bw);
      reset_peak_rss();
      auto m = TargetModel::load(o.model, lo);
      rows.push_back(bench_one(o.model, *m, o.prompt_tokens, o.gen_tokens, pool, bw_now, r8));
      continue;
    }
    for (const auto& s : o.shapes) {
      const double bw_now = remeasure_read_bandwidth(pool, bw);
      reset_peak_rss();
      auto m = random_model(shape_config(s), wt, 1, backend);
      rows.push_back(bench_one(s, *m, o.prompt_tokens, o.gen_tokens, pool, bw_now, r8));
    }
  }
  if (o.json) {
    nlohmann::json j = nlohmann::json::array();
    for (auto& r : rows) {
      nlohmann::json fw = nlohmann::json::object(), bd = nlohmann::json::object();
      for (size_t i = 0; i < r.forward_s.size(); ++i) {
        fw[std::to_string(ks[i])] = r.forward_s[i] * 1e3;
        bd[std::to_string(ks[i])] = r.bound_s[i] * 1e3;
      }
      const WType wt = parse_wtype(r.weights);
      j.push_back({{"model", r.model}, {"weights", r.weights}, {"threads", pool.size()},
                   {"prefill_tok_s", r.prefill_tok_s}, {"decode_tok_s", r.decode_tok_s},
                   {"weight_gb_per_token", r.weight_gb}, {"kv_gb_per_token", r.kv_gb},
                   {"bandwidth_gb_s", r.bandwidth / 1e9}, {"roof_fraction", r.roof},
                   {"int8_gmac_s", rate.count(wt) ? rate[wt] / 1e9 : 0.0},
                   {"forward_ms", fw}, {"bound_ms", bd}, {"peak_rss_mb", r.peak_rss_mb}});
      if (!r.log_s.empty()) {
        nlohmann::json lg = nlohmann::json::object(), rp = nlohmann::json::object(), sn = nlohmann::json::object();
        for (size_t i = 0; i < r.log_s.size(); ++i) {
          lg[std::to_string(ks[i])] = r.log_s[i] * 1e3;
          rp[std::to_string(ks[i])] = r.rollback_s[i] * 1e3;
          sn[std::to_string(ks[i])] = r.snapshot_s[i] * 1e3;
        }
        j.back()["snapshot_copy_ms"] = sn;
        j.back()["recurrent_state_mib"] = r.state_mib;
        j.back()["verify_log_ms"] = lg;
        j.back()["rollback_ms"] = rp;
      }
    }
    std::puts(j.dump(2).c_str());
    return;
  }
  std::printf("%-14s %-6s %12s %12s %10s %10s %8s %6s %13s\n", "model", "format", "prefill t/s", "decode t/s",
              "GB/token", "KV GB/tok", "roof", "GB/s", "peak RSS MiB");
  for (auto& r : rows)
    std::printf("%-14s %-6s %12.1f %12.2f %10.3f %10.3f %7.0f%% %6.1f %13.0f\n", r.model.c_str(), r.weights.c_str(),
                r.prefill_tok_s, r.decode_tok_s, r.weight_gb, r.kv_gb, r.roof * 100, r.bandwidth / 1e9,
                r.peak_rss_mb);
  std::printf("\nforward of K tokens: ms (x K=1) | physical bound ms (x K=1 bound)\n%-14s %-6s", "model", "format");
  for (int K : ks) std::printf(" %21s", ("K=" + std::to_string(K)).c_str());
  std::printf("\n");
  for (auto& r : rows) {
    std::printf("%-14s %-6s", r.model.c_str(), r.weights.c_str());
    for (size_t i = 0; i < r.forward_s.size(); ++i)
      std::printf(" %7.1f(%4.2fx)|%5.1f(%3.1fx)", r.forward_s[i] * 1e3, r.forward_s[i] / r.forward_s[0],
                  r.bound_s[i] * 1e3, r.bound_s[i] / r.bound_s[0]);
    std::printf("\n");
  }
  bool hybrid = false;
  for (auto& r : rows) hybrid = hybrid || !r.log_s.empty();
  if (!hybrid) return;
  // What speculation costs a recurrent state on top of the verify forward above.
  std::printf("\nhybrid state per sequence, and per verify of K tokens: logging its rows (forward with minus without)"
              " | rollback to K/2 (the next verify running the kept rows) | per-row snapshots instead (K state copies),"
              " ms (%% of the verify)\n"
              "%-14s %-6s %9s", "model", "format", "state MiB");
  for (size_t i = 1; i < ks.size(); ++i) std::printf(" %39s", ("K=" + std::to_string(ks[i])).c_str());
  std::printf("\n");
  for (auto& r : rows) {
    if (r.log_s.empty()) continue;
    std::printf("%-14s %-6s %9.1f", r.model.c_str(), r.weights.c_str(), r.state_mib);
    for (size_t i = 1; i < r.forward_s.size(); ++i)
      std::printf(" %5.2f(%4.1f%%)|%5.2f(%4.1f%%)|%6.2f(%5.1f%%)", r.log_s[i] * 1e3, 100 * r.log_s[i] / r.forward_s[i],
                  r.rollback_s[i] * 1e3, 100 * r.rollback_s[i] / r.forward_s[i], r.snapshot_s[i] * 1e3,
                  100 * r.snapshot_s[i] / r.forward_s[i]);
    std::printf("\n");
  }
}

}  // namespace dflash::bench
