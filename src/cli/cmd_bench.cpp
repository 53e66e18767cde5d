// dflash bench: prefill and decode speed of real model shapes with random weights generated
// in memory (nothing downloaded or committed), and decode's fraction of the bandwidth roof.
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/bandwidth.h"
#include "cli/bench_dflash.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "decoding/generator.h"
#include "kernels/kernels.h"
#include "models/arch/arch_spec.h"
#include "util/error.h"
#include "util/timer.h"

namespace dflash::cli {

namespace {

ModelConfig shape_config(const std::string& name) {
  ModelConfig c;
  c.vocab = 151936;
  c.tie_embeddings = true;
  c.rope_theta = 1e6;
  c.eos_ids = {};
  if (name == "qwen2.5-0.5b") {
    c.arch = find_arch_by_hf_name("Qwen2ForCausalLM");
    c.hidden = 896, c.n_layers = 24, c.n_heads = 14, c.n_kv_heads = 2, c.head_dim = 64, c.ffn = 4864;
  } else if (name == "qwen3-1.7b") {
    c.arch = find_arch_by_hf_name("Qwen3ForCausalLM");
    c.hidden = 2048, c.n_layers = 28, c.n_heads = 16, c.n_kv_heads = 8, c.head_dim = 128, c.ffn = 6144;
  } else if (name == "tiny") {  // for smoke tests of the bench itself
    c.arch = find_arch_by_hf_name("Qwen3ForCausalLM");
    c.hidden = 256, c.n_layers = 2, c.n_heads = 4, c.n_kv_heads = 2, c.head_dim = 64, c.ffn = 512, c.vocab = 4096;
  } else {
    throw Error("unknown shape '" + name + "' (known: qwen2.5-0.5b, qwen3-1.7b, tiny)");
  }
  c.architecture = c.arch->hf_name;
  c.attention_bias = c.arch->qkv_bias;
  return c;
}

struct Row {
  std::string model, weights;
  double prefill_tok_s = 0, decode_tok_s = 0, weight_gb = 0, roof = 0;
};

Row bench_one(const std::string& label, const Transformer& m, int prompt_tokens, int gen_tokens, ThreadPool& pool,
              double bw) {
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
  r.roof = double(m.weight_bytes()) * r.decode_tok_s / bw;
  return r;
}

}  // namespace

void add_bench_command(CLI::App& app) {
  struct Opts {
    std::vector<std::string> shapes{"qwen2.5-0.5b", "qwen3-1.7b"};
    std::vector<std::string> weights{"bf16", "q8", "q4"};
    std::string model;
    int threads = 0, prompt_tokens = 512, gen_tokens = 64;
    bool json = false;
    DflashBenchOptions spec;
  };
  auto o = std::make_shared<Opts>();
  auto* sub = app.add_subcommand("bench", "Prefill/decode speed and bandwidth-roof fraction");
  sub->add_option("--shape", o->shapes, "qwen2.5-0.5b, qwen3-1.7b, tiny (random weights)")->delimiter(',');
  sub->add_option("--model", o->model, "Benchmark this model folder instead of random shapes");
  sub->add_option("--weights", o->weights, "Weight formats to compare")->delimiter(',');
  sub->add_option("--threads", o->threads);
  sub->add_option("--prompt-tokens", o->prompt_tokens)->check(CLI::Range(1, 1 << 20));
  sub->add_option("--gen-tokens", o->gen_tokens)->check(CLI::Range(2, 1 << 20));
  sub->add_flag("--json", o->json);
  sub->add_option("--draft", o->spec.draft, "DFlash draft: compare plain and speculative decoding instead");
  sub->add_option("--block-sizes", o->spec.block_sizes, "With --draft: block sizes to compare")->delimiter(',');
  sub->add_option("--prompts", o->spec.prompts_file, "With --draft: JSON {code: [...], long_context: [...]}");
  sub->add_option("--n-prompts", o->spec.n_prompts, "With --draft: at most this many prompts per regime");
  sub->add_option("--long-prompt-tokens", o->spec.long_prompt_tokens, "With --draft: long-context prompt length");
  sub->add_option("--bench-gen-tokens", o->spec.gen_tokens, "With --draft: new tokens per prompt (default 300/256)");
  sub->add_flag("--no-adaptive", o->spec.no_adaptive, "With --draft: fixed block size");
  sub->callback([o] {
    if (!o->spec.draft.empty()) {
      o->spec.model = o->model;
      o->spec.threads = o->threads;
      o->spec.json = o->json;
      if (o->weights.size() == 1) o->spec.weights = o->weights[0];
      return run_dflash_bench(o->spec);
    }
    ThreadPool pool(o->threads > 0 ? o->threads : default_thread_count());
    const double bw = measure_read_bandwidth(pool);
    std::fprintf(stderr, "threads %d, SIMD %s, measured read bandwidth %.1f GB/s\n", pool.size(), simd_target_name(),
                 bw / 1e9);
    std::vector<Row> rows;
    for (const auto& wname : o->weights) {
      const WType wt = parse_wtype(wname);
      if (!o->model.empty()) {
        LoadOptions lo;
        lo.weights = wt;
        lo.populate = true;  // page faults are not what we measure
        auto m = Transformer::load(o->model, lo);
        rows.push_back(bench_one(o->model, *m, o->prompt_tokens, o->gen_tokens, pool, bw));
        continue;
      }
      for (const auto& s : o->shapes) {
        auto m = Transformer::random(shape_config(s), wt, 1);
        rows.push_back(bench_one(s, *m, o->prompt_tokens, o->gen_tokens, pool, bw));
      }
    }
    if (o->json) {
      nlohmann::json j = nlohmann::json::array();
      for (auto& r : rows)
        j.push_back({{"model", r.model}, {"weights", r.weights}, {"threads", pool.size()},
                     {"prefill_tok_s", r.prefill_tok_s}, {"decode_tok_s", r.decode_tok_s},
                     {"weight_gb_per_token", r.weight_gb}, {"bandwidth_gb_s", bw / 1e9}, {"roof_fraction", r.roof}});
      std::puts(j.dump(2).c_str());
      return;
    }
    std::printf("%-14s %-6s %12s %12s %10s %8s\n", "model", "format", "prefill t/s", "decode t/s", "GB/token", "roof");
    for (auto& r : rows)
      std::printf("%-14s %-6s %12.1f %12.2f %10.3f %7.0f%%\n", r.model.c_str(), r.weights.c_str(), r.prefill_tok_s,
                  r.decode_tok_s, r.weight_gb, r.roof * 100);
  });
}

}  // namespace dflash::cli
