// dflash generate: one prompt, streamed text or one JSON object with ids and timings.
#include <cstdio>
#include <nlohmann/json.hpp>

#include "chat/simple_chat_prompt.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "decoding/spec_report.h"
#include "decoding/generator.h"
#include "decoding/speculative.h"
#include "models/dflash/dflash_draft.h"
#include "models/model_files.h"
#include "util/error.h"

namespace dflash::cli {

namespace {

struct GenerateOpts {
  std::string model, draft, prompt, prompt_ids, weights = "native", acceptance = "target", draft_act = "f32";
  int block_size = 0;  // 0: the draft's own block_size
  bool no_adaptive = false, no_draft = false;
  bool chat = false, json = false, ignore_eos = false, think = false;
  int max_tokens = 256, threads = 0, chunk_size = 512, ctx_size = 4096;
  float temperature = 0.0f, top_p = 1.0f, min_p = 0.0f, repetition_penalty = 1.0f;
  int top_k = 0;
  uint64_t seed = 0;
  CacheTypes cache;
  std::string simd_target;
};

void run_generate(const GenerateOpts& o) {
  hold_simd_target(o.simd_target);
  const std::string dir = resolve_model_dir(o.model);
  PairOptions po;
  po.model = dir;
  // No --model: the shipped demo pair, draft included, as serve does.
  po.draft = o.no_draft ? "" : !o.draft.empty() || !o.model.empty() ? o.draft : demo_draft_beside(dir);
  if (o.block_size > 0 && po.draft.empty())
    throw Error("--block-size needs a draft (--draft DIR); without one there is nothing to speculate with");
  po.weights = parse_weights_option(o.weights);
  po.threads = o.threads;
  apply_cache_types(o.cache, po);
  ModelPair pair = load_pair(po);
  const Tokenizer* tok = pair.tokenizer.get();
  const TargetModel& model = *pair.target;

  std::vector<int32_t> prompt;
  if (!o.prompt_ids.empty()) {
    prompt = parse_id_list(o.prompt_ids);
  } else {
    if (!tok) throw file_error(dir, "missing tokenizer.json (needed for --prompt; use --prompt-ids)");
    const std::string text = o.chat ? simple_chat_prompt(o.prompt, o.think) : o.prompt;
    prompt = tok->encode(text);
  }
  if (prompt.empty()) throw Error("the prompt is empty");

  DFlashDraft* draft = pair.draft.get();
  std::unique_ptr<Generator> gen_owner;
  SpeculativeGenerator* spec = nullptr;
  if (draft) {
    if (o.draft_act == "f16") draft->set_activations(DraftActivations::F16);
    else if (o.draft_act != "f32") throw Error("--draft-activations must be f32 or f16");
    SpecParams sp;
    sp.block_size = o.block_size > 0 ? o.block_size : draft->config().block_size;
    sp.adaptive = !o.no_adaptive;
    if (o.acceptance == "probabilistic") sp.acceptance = Acceptance::Probabilistic;
    else if (o.acceptance != "target") throw Error("--acceptance must be target or probabilistic");
    auto sg = std::make_unique<SpeculativeGenerator>(model, *draft, o.ctx_size, sp);
    spec = sg.get();
    gen_owner = std::move(sg);
  } else {
    gen_owner = std::make_unique<Generator>(model, o.ctx_size);
  }
  Generator& gen = *gen_owner;
  GenerateParams gp;
  gp.sampling = {o.temperature, o.top_k, o.top_p, o.min_p, o.repetition_penalty, o.seed, 0.0f, 0.0f, {}};
  gp.max_tokens = o.max_tokens;
  gp.stop_ids = pair.stop_ids;
  gp.ignore_eos = o.ignore_eos;
  gp.chunk_size = o.chunk_size;
  gen.start(prompt, gp);

  std::vector<int32_t> ids;
  std::unique_ptr<StreamDecoder> sd;
  if (tok && !o.json) sd = std::make_unique<StreamDecoder>(*tok, /*skip_special=*/true);
  for (bool more = true; more;) {
    std::vector<int32_t> fresh;
    more = gen.step(fresh);
    for (int32_t t : fresh) {
      ids.push_back(t);
      if (sd) std::fputs(sd->push(t).c_str(), stdout);
    }
    if (sd) std::fflush(stdout);
  }
  const Timings& tm = gen.timings();
  if (!o.json) {
    if (sd) std::fputs(sd->flush().c_str(), stdout);
    std::fputs("\n", stdout);
    if (spec) {
      const SpecStats& st = spec->stats();
      std::fprintf(stderr, "[dflash: %s, block %d, drafted %ld, accepted %ld (%.1f%%), tau %.2f]\n",
                   spec_state(st).c_str(), st.block_size, st.drafted, st.accepted, 100 * st.accept_rate(),
                   st.accept_len());
    }
    std::fprintf(stderr, "[%d prompt tokens, %.1f tok/s prefill | %d generated, %.1f tok/s decode | ttft %.1f ms | %s]\n",
                 tm.prompt_tokens, tm.prefill_tok_s(), tm.generated_tokens, tm.decode_tok_s(), tm.ttft_s * 1e3,
                 finish_reason_name(gen.finish_reason()));
    return;
  }
  nlohmann::json j;
  j["prompt_ids"] = prompt;
  j["ids"] = ids;
  j["text"] = tok ? tok->decode(ids, /*skip_special=*/true) : "";
  j["finish_reason"] = finish_reason_name(gen.finish_reason());
  j["timings"] = {{"prompt_tokens", tm.prompt_tokens},
                  {"generated_tokens", tm.generated_tokens},
                  {"prefill_tok_s", tm.prefill_tok_s()},
                  {"decode_tok_s", tm.decode_tok_s()},
                  {"ttft_ms", tm.ttft_s * 1e3}};
  j["weights"] = o.weights;
  j["cache_type"] = o.cache.target;
  if (spec) j["dflash"] = spec_stats_json(spec->stats(), tm);
  std::puts(j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
}

}  // namespace

void add_generate_command(CLI::App& app) {
  auto o = std::make_shared<GenerateOpts>();
  auto* sub = app.add_subcommand("generate", "Generate a continuation of one prompt");
  sub->add_option("--model", o->model, "Hugging Face model folder or GGUF file (default: the shipped demo pair, draft included)");
  auto* p = sub->add_option("--prompt", o->prompt, "Prompt text");
  auto* pi = sub->add_option("--prompt-ids", o->prompt_ids, "Prompt as comma-separated token ids");
  p->excludes(pi);
  sub->add_flag("--chat", o->chat, "Wrap the prompt as one user turn of the chat format");
  sub->add_flag("--think", o->think, "With --chat: leave thinking enabled");
  sub->add_option("--max-tokens", o->max_tokens, "Tokens to generate")->check(CLI::Range(0, 1 << 24));
  sub->add_option("--temperature", o->temperature, "0 = greedy")->check(CLI::Range(0.0, 100.0));
  sub->add_option("--top-k", o->top_k)->check(CLI::Range(0, 1 << 24));
  sub->add_option("--top-p", o->top_p)->check(CLI::Range(0.0, 1.0));
  sub->add_option("--min-p", o->min_p)->check(CLI::Range(0.0, 1.0));
  sub->add_option("--repetition-penalty", o->repetition_penalty)->check(CLI::Range(0.01, 100.0));
  sub->add_option("--seed", o->seed);
  sub->add_option("--threads", o->threads, "Worker threads (default: all cores)");
  sub->add_option("--weights", o->weights, "native (the checkpoint's own dtypes) | bf16 | q8 | q4 | f32 | f16")->capture_default_str();
  sub->add_option("--chunk-size", o->chunk_size, "Prefill chunk size")->check(CLI::Range(1, 1 << 20));
  sub->add_option("--ctx-size", o->ctx_size, "Context size in tokens")->check(CLI::Range(2, 1 << 22));
  sub->add_flag("--ignore-eos", o->ignore_eos, "Do not stop at end-of-sequence tokens");
  add_cache_type_options(sub, o->cache);
  add_simd_target_option(sub, o->simd_target);
  sub->add_flag("--json", o->json, "Print one JSON object instead of streaming text");
  sub->add_option("--draft", o->draft, "DFlash draft folder or llama.cpp dflash GGUF: enables speculative decoding");
  sub->add_option("--block-size", o->block_size, "Largest block (drafted tokens + 1); default: the draft's")
      ->check(CLI::Range(1, 256));
  sub->add_flag("--no-draft", o->no_draft, "Plain decoding (no --model: the demo target without its draft)");
  sub->add_flag("--no-adaptive", o->no_adaptive, "Always draft a full block (no cost-based controller)");
  sub->add_option("--acceptance", o->acceptance, "target (token-exact, the reference scheme) | probabilistic");
  sub->add_option("--draft-activations", o->draft_act, "f32 (default) | f16 (reproduces fp16 overflow)");
  sub->callback([o] {
    if (o->prompt.empty() && o->prompt_ids.empty()) throw Error("give --prompt or --prompt-ids");
    run_generate(*o);
  });
}

}  // namespace dflash::cli
