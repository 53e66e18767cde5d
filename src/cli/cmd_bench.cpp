// dflash bench: the command's options; the measurements are the bench module's (src/bench).
// One mode per run: --plot-from redraws a saved result, --vs-llamacpp compares with llama.cpp,
// --concurrency measures batched streams,
// --cache-type compares KV cache formats, --draft compares plain and speculative decoding, and
// otherwise the speed of model shapes is measured against the bandwidth and int8 roofs.
#include <memory>
#include <nlohmann/json.hpp>

#include "bench/concurrency_bench.h"
#include "bench/dflash_bench.h"
#include "bench/kv_cache_bench.h"
#include "bench/llamacpp_bench.h"
#include "bench/llama_server_bench.h"
#include "bench/speed_bench.h"
#include "bench/structured_bench.h"
#include "bench/svg_plot.h"
#include "cli/commands.h"
#include "util/error.h"

namespace dflash::cli {

void add_bench_command(CLI::App& app) {
  struct Opts {
    bench::SpeedBenchOptions speed;  // also the shapes, weights, model and threads of the other modes
    bool vs_llamacpp = false;
    std::string vs_llama_server;
    std::string plot, json_out, plot_from;
    bench::DflashBenchOptions spec;
    bench::StructuredBenchOptions structured;
    std::vector<std::string> cache_types;
    std::vector<int> concurrency;
    int context = 4096, rounds = 3;
  };
  auto o = std::make_shared<Opts>();
  auto* sub = app.add_subcommand("bench", "Prefill/decode speed and bandwidth-roof fraction");
  auto* shape_opt = sub->add_option("--shape", o->speed.shapes, "qwen2.5-0.5b, qwen2.5-1.5b, qwen3-1.7b, tiny, qwen3.5-0.8b, qwen3.5-2b, qwen3.5-4b, qwen3.5-tiny (random weights)")
      ->delimiter(',');
  sub->add_option("--model", o->speed.model, "Benchmark this model folder instead of random shapes");
  auto* weights_opt = sub->add_option("--weights", o->speed.weights, "Weight formats to compare")->delimiter(',');
  sub->add_option("--threads", o->speed.threads);
  sub->add_option("--prompt-tokens", o->speed.prompt_tokens)->check(CLI::Range(1, 1 << 20));
  auto* gen_opt = sub->add_option("--gen-tokens", o->speed.gen_tokens)->check(CLI::Range(2, 1 << 20));
  sub->add_flag("--json", o->speed.json);
  sub->add_flag("--vs-llamacpp", o->vs_llamacpp,
                "Same GGUF file in dflash and llama.cpp (node-llama-cpp), side by side (default --weights q8,q4, "
                "--gen-tokens 128; --model takes a .gguf file)");
  sub->add_option("--vs-llama-server", o->vs_llama_server,
                  "With --draft: also run llama.cpp's own DFlash (this llama-server binary, --spec-type "
                  "draft-dflash) on the same pair and code prompts, plain and per block size, side by side");
  sub->add_option("--plot", o->plot, "Write an SVG picture of the cost curve / block-size sweep here");
  sub->add_option("--json-out", o->json_out, "Also write the JSON result here (and the SVG beside it unless --plot)");
  sub->add_option("--plot-from", o->plot_from, "Only redraw --plot FILE.svg from a saved --json-out file");
  sub->add_option("--schema", o->structured.schema,
                  "Structured output's cost: a JSON Schema file (or json_object); with --model [--draft], or "
                  "--shape NAME --tokenizer FILE");
  sub->add_option("--tokenizer", o->structured.tokenizer, "With --schema --shape: the tokenizer.json to mask with");
  sub->add_option("--draft", o->spec.draft, "DFlash draft: compare plain and speculative decoding instead");
  sub->add_option("--draft2", o->spec.draft2, "With --draft: a second draft (e.g. DFlash2) on the same prompts");
  auto* blocks_opt = sub->add_option("--block-sizes", o->spec.block_sizes,
                  "With --draft: block sizes to compare (with --concurrency: one, the block size, or the controller's "
                  "largest; default the draft's)")
      ->delimiter(',');
  sub->add_option("--prompts", o->spec.prompts_file, "With --draft: JSON {code: [...], long_context: [...]}");
  sub->add_option("--n-prompts", o->spec.n_prompts, "With --draft: at most this many prompts per regime");
  sub->add_option("--long-prompt-tokens", o->spec.long_prompt_tokens, "With --draft: long-context prompt length");
  sub->add_option("--bench-gen-tokens", o->spec.gen_tokens, "With --draft: new tokens per prompt (default 300/256)");
  sub->add_flag("--no-adaptive", o->spec.no_adaptive, "With --draft: fixed block size");
  sub->add_option("--controller", o->spec.controller,
                  "With --draft: on | off | both (each block size with the controller on and off, alternating)")
      ->check(CLI::IsMember({"on", "off", "both"}));
  sub->add_option("--predict-shapes", o->spec.predict_shapes,
                  "With --draft: real shapes (qwen2.5-0.5b, qwen3-1.7b, ...) whose measured verify and draft costs "
                  "turn this run's tau into a predicted speedup")
      ->delimiter(',');
  sub->add_option("--predict-weights", o->spec.predict_weights, "With --predict-shapes: q4 (default) or q8");
  sub->add_option("--predict-draft-layers", o->spec.predict_draft_layers,
                  "With --predict-shapes: layers of the random draft (default 5, as published)")
      ->check(CLI::Range(1, 64));
  sub->add_option("--cache-type", o->cache_types, "Compare decode speed of these KV cache formats (f32,q8,q4); with --concurrency one format, "
                  "the slots' KV cache (default f32, as dflash serve)")
      ->delimiter(',');
  sub->add_option("--context", o->context, "With --cache-type: tokens of context (default 4096)")
      ->check(CLI::Range(1, 1 << 22));
  sub->add_option("--concurrency", o->concurrency,
                  "Streams at once (e.g. 1,2,4,8): aggregate tok/s and latency, plain and with --draft, batched")
      ->delimiter(',')
      ->check(CLI::Range(1, 256));
  auto* rounds_opt = sub->add_option("--rounds", o->rounds,
                                     "With --cache-type or --draft: rounds, best kept (default 3); with --vs-llamacpp: "
                                     "rounds of both engines in turn, the best of each kept (default 1)")
                         ->check(CLI::Range(1, 100));
  sub->callback([o, shape_opt, weights_opt, gen_opt, rounds_opt, blocks_opt] {
    const bench::SpeedBenchOptions& s = o->speed;
    auto save = [o](const nlohmann::json& doc) { bench::save_bench_outputs(doc, o->json_out, o->plot); };
    if (!o->plot_from.empty()) return bench::replot_bench(o->plot_from, o->plot);
    if (!o->vs_llama_server.empty() && (o->spec.draft.empty() || !o->concurrency.empty()))
      throw Error("bench --vs-llama-server needs --draft (and no --concurrency): it compares speculative decoding");
    if (!o->concurrency.empty()) {
      bench::ConcurrencyBenchOptions co;
      co.model = s.model;
      co.draft = o->spec.draft;
      co.prompts_file = o->spec.prompts_file;
      co.levels = o->concurrency;
      if (s.weights.size() == 1) co.weights = s.weights[0];
      co.threads = s.threads;
      if (gen_opt->count()) co.gen_tokens = s.gen_tokens;
      co.rounds = rounds_opt->count() ? o->rounds : 1;
      co.adaptive = !o->spec.no_adaptive;
      if (blocks_opt->count()) {
        if (o->spec.block_sizes.size() != 1) throw Error("bench --concurrency takes one --block-sizes value");
        if (o->spec.block_sizes[0] < 2 || o->spec.block_sizes[0] > 64) throw Error("--block-sizes must be 2..64");
        co.block_size = o->spec.block_sizes[0];
      }
      if (!o->cache_types.empty()) {  // here the slots' KV cache, not formats to compare
        if (o->cache_types.size() != 1) throw Error("bench --concurrency takes one --cache-type value (the slots' KV cache)");
        co.cache_type = o->cache_types[0];
      }
      co.json = s.json;
      co.vs_llamacpp = o->vs_llamacpp;
      return save(bench::run_concurrency_bench(co));
    }
    if (o->vs_llamacpp) {  // its own defaults for --weights, --gen-tokens and --rounds
      bench::LlamaBenchOptions lo;
      lo.shapes = s.shapes;
      if (weights_opt->count()) lo.weights = s.weights;
      lo.model = s.model;
      lo.threads = s.threads;
      lo.prompt_tokens = s.prompt_tokens;
      if (gen_opt->count()) lo.gen_tokens = s.gen_tokens;
      if (rounds_opt->count()) lo.rounds = o->rounds;
      lo.json = s.json;
      return save(bench::run_llamacpp_bench(lo));
    }
    if (!o->cache_types.empty()) {
      bench::KvCacheBenchOptions ko;
      ko.shapes = s.shapes;
      ko.weights = s.weights;
      ko.cache_types = o->cache_types;
      ko.threads = s.threads;
      ko.context = o->context;
      ko.gen_tokens = s.gen_tokens;
      ko.rounds = o->rounds;
      ko.json = s.json;
      return bench::run_kv_cache_bench(ko);
    }
    if (!o->structured.schema.empty()) {
      bench::StructuredBenchOptions so = o->structured;
      so.model = s.model;
      so.draft = o->spec.draft;
      if (shape_opt->count() && !s.shapes.empty()) so.shape = s.shapes[0];
      if (weights_opt->count() && !s.weights.empty()) so.weights = s.weights[0];
      if (gen_opt->count()) so.gen_tokens = s.gen_tokens;
      so.threads = s.threads;
      so.json = s.json;
      bench::run_structured_bench(so);  // --json prints its result; no plot of its own
      return;
    }
    if (!o->spec.draft.empty()) {
      o->spec.model = s.model;
      o->spec.threads = s.threads;
      o->spec.json = s.json;
      o->spec.rounds = o->rounds;
      if (s.weights.size() == 1) o->spec.weights = s.weights[0];
      const bool peer = !o->vs_llama_server.empty();
      bench::LlamaServerPeerOptions lo;
      if (peer) {
        lo.server = o->vs_llama_server;
        lo.model = s.model;
        lo.draft = o->spec.draft;
        lo.weights = o->spec.weights;
        lo.block_sizes = o->spec.block_sizes;
        lo.n_prompts = o->spec.n_prompts;
        lo.gen_tokens = o->spec.gen_tokens > 0 ? o->spec.gen_tokens : 300;  // the code regime's default
        lo.threads = s.threads;
        lo.prompts_file = o->spec.prompts_file;
        bench::check_llama_server_peer(lo);
      }
      // With the peer, --json prints the document once, with both engines in it.
      if (peer) o->spec.json = false;
      nlohmann::json doc = bench::run_dflash_bench(o->spec);
      if (peer) {
        doc["llama_server"] = bench::run_llama_server_peer(lo);
        bench::print_llama_server_comparison(doc, doc["llama_server"]);
        if (s.json) std::puts(doc.dump(2).c_str());
      }
      return save(doc);
    }
    bench::run_speed_bench(s);
  });
}

}  // namespace dflash::cli
