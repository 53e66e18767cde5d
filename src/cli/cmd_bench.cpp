// dflash bench: prefill and decode speed of real model shapes with random weights generated
// in memory (nothing downloaded or committed), decode's fraction of the bandwidth roof, and the
// time of one forward of K tokens (what a speculative verify costs) against its physical bound
// max(weight bytes / bandwidth, multiply-adds / int8 rate), both rates measured in the same run.
#include <algorithm>
#include <map>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/bandwidth.h"
#include "cli/bench_dflash.h"
#include "cli/bench_kv.h"
#include "cli/bench_llamacpp.h"
#include "cli/bench_shapes.h"
#include "cli/svg_plot.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "decoding/generator.h"
#include "kernels/kernels.h"
#include "models/arch/arch_spec.h"
#include "util/error.h"
#include "util/peak_rss.h"
#include "util/timer.h"

namespace dflash::cli {

ModelConfig shape_config(const std::string& name) {
  ModelConfig c;
  c.vocab = 151936;
  c.tie_embeddings = true;
  c.rope_theta = 1e6;
  c.eos_ids = {};
  if (name == "qwen2.5-0.5b") {
    c.arch = find_arch_by_hf_name("Qwen2ForCausalLM");
    c.hidden = 896, c.n_layers = 24, c.n_heads = 14, c.n_kv_heads = 2, c.head_dim = 64, c.ffn = 4864;
  } else if (name == "qwen2.5-1.5b") {
    c.arch = find_arch_by_hf_name("Qwen2ForCausalLM");
    c.hidden = 1536, c.n_layers = 28, c.n_heads = 12, c.n_kv_heads = 2, c.head_dim = 128, c.ffn = 8960;
  } else if (name == "qwen3-1.7b") {
    c.arch = find_arch_by_hf_name("Qwen3ForCausalLM");
    c.hidden = 2048, c.n_layers = 28, c.n_heads = 16, c.n_kv_heads = 8, c.head_dim = 128, c.ffn = 6144;
  } else if (name == "tiny") {  // for smoke tests of the bench itself
    c.arch = find_arch_by_hf_name("Qwen3ForCausalLM");
    c.hidden = 256, c.n_layers = 2, c.n_heads = 4, c.n_kv_heads = 2, c.head_dim = 64, c.ffn = 512, c.vocab = 4096;
  } else {
    throw Error("unknown shape '" + name + "' (known: qwen2.5-0.5b, qwen2.5-1.5b, qwen3-1.7b, tiny)");
  }
  c.architecture = c.arch->hf_name;
  c.attention_bias = c.arch->qkv_bias;
  return c;
}

namespace {
const std::vector<int>& kCurveK = curve_k();
using Row = BenchRow;
}  // namespace

// Multiply-adds per second of the int8 kernel on weights that stay in cache (64 activation
// rows, all threads, a matrix of 1024 rows per thread so that per-call costs do not count):
// the compute roof of a forward of many tokens in that format.
double measure_int8_rate(WType t, ThreadPool& pool) {
  const int K = 2048, N = 1024 * pool.size(), M = 64;
  std::vector<float> wf(size_t(N) * K), x(size_t(M) * K), y(size_t(M) * N);
  for (size_t i = 0; i < wf.size(); ++i) wf[i] = float(int(i * 2654435761u % 255) - 127) / 127.0f;
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(int(i * 40503u % 255) - 127) / 127.0f;
  const WeightMatrix w = pack_weight_matrix(make_weight_matrix(wf.data(), N, K, t));  // as the models hold it
  double best = 1e30;
  for (int rep = 0; rep < 7; ++rep) {
    const double t0 = now_seconds();
    for (int i = 0; i < 4; ++i) matmul(x.data(), M, w, y.data(), &pool);
    best = std::min(best, (now_seconds() - t0) / 4);
  }
  return double(M) * N * K / best;
}

namespace {
// Seconds of one forward of K tokens after `ctx` tokens of context, per kCurveK: a warm-up,
// then the median of kCurveReps forwards, the statistic tools/bench/llamacpp_peer.mjs takes.
std::vector<double> forward_curve(const Transformer& m, ThreadPool& pool, int ctx) {
  const int V = m.config().vocab, kmax = kCurveK.back();
  std::vector<int32_t> ids(size_t(ctx + kmax));
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = int32_t((i * 7919 + 13) % size_t(V));
  KVCache cache = m.make_cache(ctx + kmax);
  std::vector<float> logits(size_t(kmax) * V);
  ForwardArgs pre;
  pre.tokens = ids.data();
  pre.n = ctx;
  pre.logits = logits.data();
  m.forward(cache, pre, &pool);
  std::vector<double> out;
  for (int K : kCurveK) {
    std::vector<double> t;
    for (int rep = 0; rep <= kCurveReps; ++rep) {
      ForwardArgs a;
      a.tokens = ids.data() + ctx;
      a.n = K;
      a.logits_from = 0;  // a verify needs every row's logits
      a.logits = logits.data();
      const double t0 = now_seconds();
      m.forward(cache, a, &pool);
      if (rep > 0) t.push_back(now_seconds() - t0);
      cache.rollback(ctx);
    }
    std::nth_element(t.begin(), t.begin() + t.size() / 2, t.end());
    out.push_back(t[t.size() / 2]);
  }
  return out;
}

}  // namespace

Row bench_one(const std::string& label, const Transformer& m, int prompt_tokens, int gen_tokens, ThreadPool& pool,
              double bw, double int8_rate) {
  std::vector<int32_t> prompt(static_cast<size_t>(prompt_tokens));
  for (int i = 0; i < prompt_tokens; ++i) prompt[size_t(i)] = (i * 7919 + 13) % m.config().vocab;
  Generator gen(m, &pool, prompt_tokens + gen_tokens + 8);
  GenerateParams gp;
  gp.max_tokens = gen_tokens;
  gp.ignore_eos = true;
  gen.start(prompt, gp);
  std::vector<int32_t> out;
  while (gen.step(out)) {
  }
  Row r;
  r.model = label;
  r.weights = wtype_name(m.weight_type());
  r.prefill_tok_s = gen.timings().prefill_tok_s();
  r.decode_tok_s = gen.timings().decode_tok_s();
  r.weight_gb = double(m.weight_bytes()) / 1e9;
  const ModelConfig& c = m.config();
  const double kv_per_pos = 2.0 * c.n_layers * c.n_kv_heads * double(row_bytes(m.cache_type(), c.head_dim));
  r.kv_gb = kv_per_pos * (prompt_tokens + gen_tokens / 2.0) / 1e9;
  r.roof = r.roof_against(bw);
  r.bandwidth = bw;
  const int curve_ctx = std::min(prompt_tokens, 128);
  r.forward_s = forward_curve(m, pool, curve_ctx);
  // Multiply-adds per token ~ weights streamed per token (the matrices; attention over a short
  // context is small next to them).
  const WType wt = m.weight_type();
  const double bytes_per_weight = double(row_bytes(wt, 256)) / 256.0;
  const double macs = double(m.weight_bytes()) / bytes_per_weight;
  for (int K : kCurveK)
    r.bound_s.push_back(std::max((double(m.weight_bytes()) + kv_per_pos * (curve_ctx + K)) / bw,
                                 int8_rate > 0 ? macs * K / int8_rate : 0.0));
  const int64_t rss = peak_rss_bytes();
  r.peak_rss_mb = rss < 0 ? -1 : double(rss) / (1 << 20);
  return r;
}

void add_bench_command(CLI::App& app) {
  struct Opts {
    std::vector<std::string> shapes{"qwen2.5-0.5b", "qwen3-1.7b"};
    std::vector<std::string> weights{"bf16", "q8", "q4"};
    std::string model;
    int threads = 0, prompt_tokens = 512, gen_tokens = 64;
    bool json = false, vs_llamacpp = false;
    std::string plot, json_out, plot_from;
    DflashBenchOptions spec;
  };
  auto o = std::make_shared<Opts>();
  auto* sub = app.add_subcommand("bench", "Prefill/decode speed and bandwidth-roof fraction");
  sub->add_option("--shape", o->shapes, "qwen2.5-0.5b, qwen2.5-1.5b, qwen3-1.7b, tiny (random weights)")->delimiter(',');
  sub->add_option("--model", o->model, "Benchmark this model folder instead of random shapes");
  auto* weights_opt = sub->add_option("--weights", o->weights, "Weight formats to compare")->delimiter(',');
  sub->add_option("--threads", o->threads);
  sub->add_option("--prompt-tokens", o->prompt_tokens)->check(CLI::Range(1, 1 << 20));
  auto* gen_opt = sub->add_option("--gen-tokens", o->gen_tokens)->check(CLI::Range(2, 1 << 20));
  sub->add_flag("--json", o->json);
  sub->add_flag("--vs-llamacpp", o->vs_llamacpp,
                "Same GGUF file in dflash and llama.cpp (node-llama-cpp), side by side (default --weights q8,q4, "
                "--gen-tokens 128; --model takes a .gguf file)");
  sub->add_option("--plot", o->plot, "Write an SVG picture of the cost curve / block-size sweep here");
  sub->add_option("--json-out", o->json_out, "Also write the JSON result here (and the SVG beside it unless --plot)");
  sub->add_option("--plot-from", o->plot_from, "Only redraw --plot FILE.svg from a saved --json-out file");
  sub->add_option("--draft", o->spec.draft, "DFlash draft: compare plain and speculative decoding instead");
  sub->add_option("--draft2", o->spec.draft2, "With --draft: a second draft (e.g. DFlash2) on the same prompts");
  sub->add_option("--block-sizes", o->spec.block_sizes, "With --draft: block sizes to compare")->delimiter(',');
  sub->add_option("--prompts", o->spec.prompts_file, "With --draft: JSON {code: [...], long_context: [...]}");
  sub->add_option("--n-prompts", o->spec.n_prompts, "With --draft: at most this many prompts per regime");
  sub->add_option("--long-prompt-tokens", o->spec.long_prompt_tokens, "With --draft: long-context prompt length");
  sub->add_option("--bench-gen-tokens", o->spec.gen_tokens, "With --draft: new tokens per prompt (default 300/256)");
  sub->add_flag("--no-adaptive", o->spec.no_adaptive, "With --draft: fixed block size");
  sub->add_option("--predict-shapes", o->spec.predict_shapes,
                  "With --draft: real shapes (qwen2.5-0.5b, qwen3-1.7b, ...) whose measured verify and draft costs "
                  "turn this run's tau into a predicted speedup")
      ->delimiter(',');
  sub->add_option("--predict-weights", o->spec.predict_weights, "With --predict-shapes: q4 (default) or q8");
  sub->add_option("--predict-draft-layers", o->spec.predict_draft_layers,
                  "With --predict-shapes: layers of the random draft (default 5, as published)")
      ->check(CLI::Range(1, 64));
  struct KvOpts {
    std::vector<std::string> cache_types;
    int context = 4096, rounds = 3;
  };
  auto kv = std::make_shared<KvOpts>();
  sub->add_option("--cache-type", kv->cache_types, "Compare decode speed of these KV cache formats (f32,q8,q4)")
      ->delimiter(',');
  sub->add_option("--context", kv->context, "With --cache-type: tokens of context (default 4096)")
      ->check(CLI::Range(1, 1 << 22));
  auto* rounds_opt = sub->add_option("--rounds", kv->rounds,
                                     "With --cache-type or --draft: rounds, best kept (default 3); with --vs-llamacpp: "
                                     "rounds of both engines in turn, the best of each kept (default 1)")
                         ->check(CLI::Range(1, 100));
  sub->callback([o, kv, weights_opt, gen_opt, rounds_opt] {
    auto save = [o](const nlohmann::json& doc) { save_bench_outputs(doc, o->json_out, o->plot); };
    if (!o->plot_from.empty()) return replot_bench(o->plot_from, o->plot);
    if (o->vs_llamacpp) {  // bench_llamacpp.cpp
      LlamaBenchOptions lo;
      lo.shapes = o->shapes;
      if (weights_opt->count()) lo.weights = o->weights;
      lo.model = o->model;
      lo.threads = o->threads;
      lo.prompt_tokens = o->prompt_tokens;
      if (gen_opt->count()) lo.gen_tokens = o->gen_tokens;
      if (rounds_opt->count()) lo.rounds = kv->rounds;
      lo.json = o->json;
      return save(run_llamacpp_bench(lo));
    }
    if (!kv->cache_types.empty()) {  // KV cache formats side by side (bench_kv.cpp)
      ThreadPool pool(o->threads > 0 ? o->threads : default_thread_count());
      std::fprintf(stderr, "threads %d, SIMD %s\n", pool.size(), simd_target_name());
      std::vector<KvBenchRow> rows;
      for (const auto& wname : o->weights)
        for (const auto& s : o->shapes) {
          auto m = Transformer::random(shape_config(s), parse_wtype(wname), 1);
          const auto r = run_kv_bench(s, *m, kv->cache_types, kv->context, o->gen_tokens, kv->rounds, pool);
          rows.insert(rows.end(), r.begin(), r.end());
        }
      return print_kv_bench(rows, o->json, pool.size());
    }
    if (!o->spec.draft.empty()) {
      o->spec.model = o->model;
      o->spec.threads = o->threads;
      o->spec.json = o->json;
      o->spec.rounds = kv->rounds;
      if (o->weights.size() == 1) o->spec.weights = o->weights[0];
      return save(run_dflash_bench(o->spec));
    }
    ThreadPool pool(o->threads > 0 ? o->threads : default_thread_count());
    double bw = measure_read_bandwidth(pool);
    std::fprintf(stderr, "threads %d, SIMD %s, measured read bandwidth %.1f GB/s\n", pool.size(), simd_target_name(),
                 bw / 1e9);
    std::map<WType, double> rate;  // int8 multiply-adds/s per block-quantized format
    for (const auto& wname : o->weights) {
      const WType wt = parse_wtype(wname);
      if (uses_int8_path(wt) && !rate.count(wt)) {
        rate[wt] = measure_int8_rate(wt, pool);
        std::fprintf(stderr, "int8 kernel rate %s (%s, cache-resident, 64 rows): %.1f G multiply-adds/s\n",
                     wtype_name(wt), qmatmul_target_name(), rate[wt] / 1e9);
      }
    }
    std::vector<Row> rows;
    for (const auto& wname : o->weights) {
      const WType wt = parse_wtype(wname);
      const double r8 = rate.count(wt) ? rate[wt] : 0.0;
      if (!o->model.empty()) {
        LoadOptions lo;
        lo.weights = wt;
        lo.populate = true;  // page faults are not what we measure
        const double bw_now = remeasure_read_bandwidth(pool, bw);
        reset_peak_rss();
        auto m = Transformer::load(o->model, lo);
        rows.push_back(bench_one(o->model, *m, o->prompt_tokens, o->gen_tokens, pool, bw_now, r8));
        continue;
      }
      for (const auto& s : o->shapes) {
        const double bw_now = remeasure_read_bandwidth(pool, bw);
        reset_peak_rss();
        auto m = Transformer::random(shape_config(s), wt, 1);
        rows.push_back(bench_one(s, *m, o->prompt_tokens, o->gen_tokens, pool, bw_now, r8));
      }
    }
    if (o->json) {
      nlohmann::json j = nlohmann::json::array();
      for (auto& r : rows) {
        nlohmann::json fw = nlohmann::json::object(), bd = nlohmann::json::object();
        for (size_t i = 0; i < r.forward_s.size(); ++i) {
          fw[std::to_string(kCurveK[i])] = r.forward_s[i] * 1e3;
          bd[std::to_string(kCurveK[i])] = r.bound_s[i] * 1e3;
        }
        const WType wt = parse_wtype(r.weights);
        j.push_back({{"model", r.model}, {"weights", r.weights}, {"threads", pool.size()},
                     {"prefill_tok_s", r.prefill_tok_s}, {"decode_tok_s", r.decode_tok_s},
                     {"weight_gb_per_token", r.weight_gb}, {"kv_gb_per_token", r.kv_gb},
                     {"bandwidth_gb_s", r.bandwidth / 1e9}, {"roof_fraction", r.roof},
                     {"int8_gmac_s", rate.count(wt) ? rate[wt] / 1e9 : 0.0},
                     {"forward_ms", fw}, {"bound_ms", bd}, {"peak_rss_mb", r.peak_rss_mb}});
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
    for (int K : kCurveK) std::printf(" %21s", ("K=" + std::to_string(K)).c_str());
    std::printf("\n");
    for (auto& r : rows) {
      std::printf("%-14s %-6s", r.model.c_str(), r.weights.c_str());
      for (size_t i = 0; i < r.forward_s.size(); ++i)
        std::printf(" %7.1f(%4.2fx)|%5.1f(%3.1fx)", r.forward_s[i] * 1e3, r.forward_s[i] / r.forward_s[0],
                    r.bound_s[i] * 1e3, r.bound_s[i] / r.bound_s[0]);
      std::printf("\n");
    }
  });
}

}  // namespace dflash::cli
