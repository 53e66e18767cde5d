#include "bench/structured_bench.h"

#include <cstdio>
#include <functional>
#include <thread>

#include "bench/model_speed.h"
#include "decoding/grammar/grammar_constraint.h"
#include "decoding/grammar/json_schema_grammar.h"
#include "decoding/speculative.h"
#include "models/model_files.h"
#include "models/model_pair.h"
#include "util/error.h"
#include "util/mapped_file.h"
#include "util/timer.h"

namespace dflash::bench {

namespace {

using ojson = nlohmann::ordered_json;

struct Totals {
  int tokens = 0, requests = 0;
  double decode_s = 0, mask_s = 0;
  double ms_per_token() const { return tokens > 1 ? decode_s * 1e3 / tokens : 0; }
  double mask_ms_per_token() const { return tokens > 0 ? mask_s * 1e3 / tokens : 0; }
};

// Requests until `gen_tokens` tokens were generated (a schema's value can end early); the
// decode time is each request's time after its first token, per token after the first.
Totals run(Generator& g, const std::vector<int32_t>& prompt, const GenerateParams& base, int gen_tokens,
           const std::function<std::shared_ptr<TokenConstraint>()>& make) {
  Totals t;
  while (t.tokens < gen_tokens && t.requests < 64) {
    GenerateParams gp = base;
    gp.max_tokens = gen_tokens - t.tokens + 1;  // the first token comes with the prefill
    gp.constraint = make ? make() : nullptr;
    g.start(prompt, gp);
    std::vector<int32_t> out;
    while (g.step(out)) {
    }
    const Timings& tm = g.timings();
    t.tokens += std::max(0, tm.generated_tokens - 1);
    t.decode_s += tm.decode_s;
    t.mask_s += tm.mask_s;
    ++t.requests;
    if (tm.generated_tokens == 0) break;
  }
  return t;
}

}  // namespace

nlohmann::json run_structured_bench(const StructuredBenchOptions& o) {
  ModelPair pair;
  std::unique_ptr<Tokenizer> own_tok;
  if (!o.shape.empty()) {
    if (o.tokenizer.empty()) throw Error("--shape needs --tokenizer (a tokenizer.json whose vocabulary fits the shape)");
    own_tok = std::make_unique<Tokenizer>(Tokenizer::from_json(read_text_file(o.tokenizer), "", o.tokenizer));
    pair.backend = make_cpu_backend(o.threads > 0 ? o.threads : int(std::thread::hardware_concurrency()));
    pair.target = random_model(shape_config(o.shape), parse_wtype(o.weights), 1, pair.backend);
    if (own_tok->vocab_size() > pair.target->config().vocab)
      throw Error("the tokenizer has more ids than the shape's vocabulary");
  } else {
    PairOptions po;
    po.model = resolve_model_dir(o.model);
    po.draft = o.draft;
    po.populate = true;
    po.threads = o.threads;
    po.need_tokenizer = true;
    pair = load_pair(po);
  }
  const Tokenizer& tok = own_tok ? *own_tok : *pair.tokenizer;
  const TargetModel& target = *pair.target;
  const int vocab = target.config().vocab;
  std::vector<int32_t> stops = pair.stop_ids;
  if (stops.empty() && !tok.special().eos.empty()) stops = tok.special().eos;
  if (stops.empty()) stops = {vocab - 1};

  GrammarBuilder b;
  const bool object = o.schema == "json_object";
  ojson schema;
  if (!object) {
    schema = ojson::parse(read_text_file(o.schema), nullptr, /*allow_exceptions=*/false);
    if (schema.is_discarded()) throw file_error(o.schema, "is not JSON (--schema wants a JSON Schema file)");
  }
  const auto grammar = b.build(object ? json_object(b) : json_schema(b, schema));
  const double tt = now_seconds();
  const auto table = TokenTable::from_tokenizer(tok, vocab);
  const double table_s = now_seconds() - tt;
  std::shared_ptr<MaskCache> cache;
  auto make = [&] { return std::make_shared<GrammarConstraint>(grammar, table, cache, stops); };

  const std::vector<int32_t> prompt = tok.encode("Reply with one JSON value that fits the schema.\n");
  GenerateParams base;
  base.stop_ids = stops;
  Generator plain(target, 4096);
  std::unique_ptr<SpeculativeGenerator> spec;
  // Adaptive, as the server runs it: under a schema the draft (trained on free text) is
  // accepted less, and the controller decides how much to draft.
  if (pair.draft) spec = std::make_unique<SpeculativeGenerator>(target, *pair.draft, 4096, SpecParams{pair.draft->config().block_size, true});

  nlohmann::json out{{"vocab", vocab}, {"table_build_ms", table_s * 1e3}, {"schema", o.schema}, {"modes", nlohmann::json::object()}};
  // With --json the table goes to stderr: stdout holds the JSON document alone.
  FILE* tout = o.json ? stderr : stdout;
  std::fprintf(tout, "structured output: %s, vocabulary %d, token table built in %.0f ms\n", o.schema.c_str(), vocab,
               table_s * 1e3);
  std::fprintf(tout, "%-12s %10s %12s %12s %12s %10s %10s\n", "decoding", "free ms/t", "cold ms/t", "warm ms/t",
               "mask ms/t", "mask/step", "cold mask");
  for (Generator* g : {&plain, static_cast<Generator*>(spec.get())}) {
    if (!g) continue;
    const std::string mode = g == &plain ? "plain" : "speculative";
    GenerateParams free_params = base;
    free_params.ignore_eos = true;
    run(*g, prompt, free_params, 8, nullptr);  // warm-up: pages, caches
    const Totals free_run = run(*g, prompt, free_params, o.gen_tokens, nullptr);
    cache = std::make_shared<MaskCache>(grammar, table);
    const Totals cold = run(*g, prompt, base, o.gen_tokens, make);
    const Totals warm = run(*g, prompt, base, o.gen_tokens, make);
    const double share = free_run.ms_per_token() > 0 ? warm.mask_ms_per_token() / free_run.ms_per_token() : 0;
    const double cold_share = free_run.ms_per_token() > 0 ? cold.mask_ms_per_token() / free_run.ms_per_token() : 0;
    std::fprintf(tout, "%-12s %10.3f %12.3f %12.3f %12.4f %9.2f%% %9.2f%%\n", mode.c_str(), free_run.ms_per_token(),
                 cold.ms_per_token(), warm.ms_per_token(), warm.mask_ms_per_token(), 100 * share, 100 * cold_share);
    out["modes"][mode] = {{"free_ms_per_token", free_run.ms_per_token()},
                          {"cold_ms_per_token", cold.ms_per_token()},
                          {"warm_ms_per_token", warm.ms_per_token()},
                          {"warm_mask_ms_per_token", warm.mask_ms_per_token()},
                          {"cold_mask_ms_per_token", cold.mask_ms_per_token()},
                          {"mask_share_of_step", share},
                          {"cold_mask_share_of_step", cold_share},
                          {"tokens", warm.tokens},
                          {"requests", warm.requests},
                          {"cache_hits", cache->hits()},
                          {"cache_misses", cache->misses()}};
  }
  if (o.json) std::printf("%s\n", out.dump(2).c_str());
  return out;
}

}  // namespace dflash::bench
