#include "bench/dflash_bench.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "bench/model_speed.h"
#include "chat/simple_chat_prompt.h"
#include "decoding/speculative.h"
#include "formats/json_file.h"
#include "models/dflash/dflash2_draft.h"
#include "models/dflash/dflash_draft.h"
#include "models/model_files.h"
#include "models/model_pair.h"
#include "util/error.h"
#include "util/timer.h"

namespace dflash::bench {

namespace {

struct Regime {
  std::string name;
  std::vector<std::vector<int32_t>> prompts;
  int gen_tokens;
};

struct Result {
  double tok_s = 0;
  long drafted = 0, accepted = 0, steps = 0, tokens = 0;
  double accept_rate() const { return drafted ? double(accepted) / double(drafted) : 0; }
  double tau() const { return steps ? double(accepted + steps) / double(steps) : 0; }
};

// One decoding setup the bench compares: plain (no draft), or a draft at block size B with the
// controller on (adaptive) or off (every step drafts B - 1 tokens).
struct Setup {
  const DFlashDraft* draft = nullptr;
  int B = 1;
  bool adaptive = false;
  Result res;
  double decode_s = 0;
};

// Decode-phase throughput over all prompts of a regime (prefill excluded: the same for all),
// for every setup on the same prompts in one run, alternating: prompt by prompt and round by
// round each setup runs once in turn, so a slow stretch of this noisy machine falls on all of
// them alike. Each prompt's fastest decode of `rounds` counts for each setup (a step of the
// demo target takes under a millisecond, so one preempted step moves a single run by several
// percent). Counts come from the first round (later ones may differ where the controller's
// timing does).
void run_regime(const TargetModel& target, std::vector<Setup>& setups, const Regime& r,
                const std::vector<int32_t>& stops, int rounds) {
  for (const auto& prompt : r.prompts) {
    std::vector<double> best(setups.size(), 1e30);
    for (int rep = 0; rep < std::max(1, rounds); ++rep) {
      for (size_t i = 0; i < setups.size(); ++i) {
        Setup& su = setups[i];
        const int ctx = int(prompt.size()) + r.gen_tokens + 32;
        std::unique_ptr<Generator> g;
        SpeculativeGenerator* sg = nullptr;
        if (su.draft) {
          auto sp = std::make_unique<SpeculativeGenerator>(target, *su.draft, ctx, SpecParams{su.B, su.adaptive});
          sg = sp.get();
          g = std::move(sp);
        } else {
          g = std::make_unique<Generator>(target, ctx);
        }
        GenerateParams gp;
        gp.max_tokens = r.gen_tokens;
        gp.stop_ids = stops;
        g->start(prompt, gp);
        std::vector<int32_t> out;
        while (g->step(out)) {
        }
        best[i] = std::min(best[i], g->timings().decode_s);
        if (rep > 0) continue;
        su.res.tokens += std::max(0, g->timings().generated_tokens - 1);
        if (sg) {
          su.res.drafted += sg->stats().drafted;
          su.res.accepted += sg->stats().accepted;
          su.res.steps += sg->stats().steps;
        }
      }
    }
    for (size_t i = 0; i < setups.size(); ++i) setups[i].decode_s += best[i];
  }
  for (Setup& su : setups) su.res.tok_s = su.decode_s > 0 ? double(su.res.tokens) / su.decode_s : 0;
}

double time_forward(const TargetModel& m, int K, int ctx_len, ThreadPool& pool, int reps) {
  auto cache = m.new_state(ctx_len + K + 1);
  std::vector<int32_t> ids(size_t(ctx_len + K));
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = int32_t((i * 31 + 7) % size_t(m.config().vocab));
  ForwardArgs a;
  a.tokens = ids.data();
  a.n = ctx_len;
  a.logits_from = ctx_len;
  m.forward(*cache, a);
  std::vector<float> logits(size_t(K) * m.config().vocab);
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    cache->rollback(ctx_len);
    ForwardArgs f;
    f.tokens = ids.data() + ctx_len;
    f.n = K;
    f.logits_from = 0;  // verify needs every row's logits
    f.logits = logits.data();
    f.rollback_rows = true;  // as the speculative loop verifies (a hybrid logs the block's rows)
    const double t0 = now_seconds();
    m.forward(*cache, f);
    best = std::min(best, now_seconds() - t0);
  }
  return best;
}

// Seconds of one draft block of B rows after ctx_len context rows, and of feeding it B new
// context rows (what a step that accepts the whole block adds), best of reps.
std::pair<double, double> time_draft(const DFlashDraft& draft, int B, int ctx_len, int vocab, ThreadPool& pool, int reps) {
  auto dc = draft.new_state(ctx_len + 2 * B + 1);
  std::vector<float> feats(size_t(ctx_len + B) * draft.feature_dim(), 0.01f), lg(size_t(B - 1) * vocab);
  draft.add_context(*dc, feats.data(), ctx_len);
  double tp = 1e30, tc = 1e30;
  for (int rep = 0; rep < reps; ++rep) {
    double t0 = now_seconds();
    draft.propose(*dc, 1, B, lg.data());
    tp = std::min(tp, now_seconds() - t0);
    t0 = now_seconds();
    draft.add_context(*dc, feats.data(), B);
    tc = std::min(tc, now_seconds() - t0);
    dc->rollback(ctx_len);
  }
  return {tp, tc};
}

// With --json the tables go to stderr: stdout holds the JSON document alone.
FILE* table_stream(const DflashBenchOptions& o) { return o.json ? stderr : stdout; }

// For each real shape: target forward of B rows and a draft of the published kind (same width
// as the target, `layers` layers, taps by the formula) per block, both on random weights; with
// this run's tau per regime and block size they predict tau / (verify + draft) in plain steps.
nlohmann::json predict_shapes(const DflashBenchOptions& o, const nlohmann::json& rows, ThreadPool& pool) {
  FILE* tout = table_stream(o);
  nlohmann::json out = nlohmann::json::array();
  const int ctx_len = 256;
  const WType wt = parse_wtype(o.predict_weights);
  for (const std::string& s : o.predict_shapes) {
    const ModelConfig tc = shape_config(s);
    std::fprintf(stderr, "predict: %s %s random target and %d-layer draft\n", s.c_str(), wtype_name(wt),
                 o.predict_draft_layers);
    auto target = random_model(tc, wt, 1, make_cpu_backend(pool.size()));
    DraftConfig dc;
    dc.hidden = tc.hidden, dc.n_layers = o.predict_draft_layers, dc.n_heads = tc.n_heads;
    dc.n_kv_heads = tc.n_kv_heads, dc.head_dim = tc.head_dim, dc.ffn = tc.ffn, dc.vocab = tc.vocab;
    dc.rms_eps = tc.rms_eps, dc.rope_theta = tc.rope_theta;
    dc.block_size = *std::max_element(o.block_sizes.begin(), o.block_sizes.end());
    dc.mask_token_id = tc.vocab - 1;
    dc.num_target_layers = tc.n_layers;
    dc.target_layer_ids = default_target_layer_ids(tc.n_layers, dc.n_layers);
    for (int& id : dc.target_layer_ids) id = std::clamp(id, 0, tc.n_layers - 1);  // the formula assumes >= 4 layers
    auto draft = DFlashDraft::random(dc, wt, *target, 2);
    const double t1 = time_forward(*target, 1, ctx_len, pool, 5);
    nlohmann::json shape{{"shape", s}, {"weights", wtype_name(wt)}, {"draft_layers", dc.n_layers},
                         {"target_layer_ids", dc.target_layer_ids}, {"forward1_ms", t1 * 1e3}};
    for (int B : o.block_sizes) {
      if (B < 2) continue;
      const double tb = time_forward(*target, B, ctx_len, pool, 3);
      const auto [tp, tcx] = time_draft(*draft, B, ctx_len, tc.vocab, pool, 3);
      const double verify = tb / t1, drafting = (tp + tcx) / t1;
      nlohmann::json b{{"verify_ratio", verify}, {"draft_ratio", drafting}};
      for (const auto& row : rows) {
        const std::string regime = row["regime"].get<std::string>(), key = std::to_string(B);
        const auto& d = row["dflash"][key];
        b["predicted"][regime] = {{"tau", d["tau"]}, {"speedup", d["tau"].get<double>() / (verify + drafting)}};
        // The --draft2 run's tau on the same costs: its convolutions and selector are left out
        // (their share of a block on the model at hand is in the row's draft2_cost).
        if (row.contains("draft2") && row["draft2"].contains(key)) {
          const double tau2 = row["draft2"][key]["tau"].get<double>();
          b["predicted_draft2"][regime] = {{"tau", tau2}, {"speedup", tau2 / (verify + drafting)}};
        }
      }
      shape["blocks"][std::to_string(B)] = b;
    }
    out.push_back(shape);
  }
  std::fprintf(tout, "\npredicted on real shapes (random weights, target forward and a draft of the published kind, "
              "%d tokens of context): tau / (verify(B) + draft(B)) in plain steps%s\n", ctx_len,
              rows.empty() || !rows[0].contains("draft2") ? ""
                  : "; tau2 (--draft2) on the same costs, its convolutions and selector not included");
  std::fprintf(tout, "%-14s %-5s %3s %8s %8s", "shape", "quant", "B", "verify", "draft");
  const bool two = !rows.empty() && rows[0].contains("draft2");
  for (const auto& row : rows) std::fprintf(tout, "  %10s tau -> pred", row["regime"].get<std::string>().c_str());
  if (two)
    for (const auto& row : rows) std::fprintf(tout, "  %8s tau2 -> pred", row["regime"].get<std::string>().c_str());
  std::fprintf(tout, "\n");
  for (const auto& sh : out)
    for (const auto& [k, b] : sh["blocks"].items()) {
      std::fprintf(tout, "%-14s %-5s %3s %7.2fx %7.2fx", sh["shape"].get<std::string>().c_str(),
                  sh["weights"].get<std::string>().c_str(), k.c_str(), b["verify_ratio"].get<double>(),
                  b["draft_ratio"].get<double>());
      for (const char* which : {"predicted", "predicted_draft2"}) {
        if (!b.contains(which)) continue;
        for (const auto& row : rows) {
          const auto& p = b[which][row["regime"].get<std::string>()];
          std::fprintf(tout, "  %14.2f -> %4.2fx", p["tau"].get<double>(), p["speedup"].get<double>());
        }
      }
      std::fprintf(tout, "\n");
    }
  return out;
}

}  // namespace

nlohmann::json run_dflash_bench(const DflashBenchOptions& o) {
  FILE* tout = table_stream(o);
  const std::string dir = resolve_model_dir(o.model);
  ModelPair pair = load_bench_pair(dir, o.draft, o.weights, o.threads);
  const auto& target = pair.target;
  const auto& draft = pair.draft;
  // A second draft (typically DFlash2) benchmarked on the same prompts in the same run.
  LoadOptions lo;
  lo.weights = parse_weights_option(o.weights);
  lo.populate = true;
  lo.backend = pair.backend;
  std::unique_ptr<DFlashDraft> draft2 = o.draft2.empty() ? nullptr : DFlashDraft::load(o.draft2, lo, *target);
  const auto* d2 = dynamic_cast<const DFlash2Draft*>(draft2.get());
  const Tokenizer* tok = pair.tokenizer.get();
  if (!tok) throw file_error(dir, "missing tokenizer.json (the bench tokenizes its prompts)");
  ThreadPool pool(pair.backend->threads());  // for the bench's own measurements, not the models
  const auto& stops = pair.stop_ids;

  // Regimes: fresh code generation from chat prompts, and a long-context edit whose prompt is
  // a long source file followed by an instruction.
  const std::string pf = o.prompts_file.empty() ? dir + "/../bench_prompts.json" : o.prompts_file;
  auto pj = read_json_file(pf);
  std::vector<Regime> regimes;
  {
    Regime r{"code", {}, o.gen_tokens > 0 ? o.gen_tokens : 300};
    for (auto& p : pj.at("code")) r.prompts.push_back(tok->encode(simple_chat_prompt(p.get<std::string>(), false)));
    if (o.n_prompts > 0 && int(r.prompts.size()) > o.n_prompts) r.prompts.resize(size_t(o.n_prompts));
    regimes.push_back(std::move(r));
  }
  if (pj.contains("long_context") && o.long_prompt_tokens > 0) {
    Regime r{"long-edit", {}, o.gen_tokens > 0 ? o.gen_tokens : 256};
    for (auto& p : pj["long_context"]) {
      auto ids = tok->encode(p.at("context").get<std::string>());
      if (int(ids.size()) > o.long_prompt_tokens) ids.resize(size_t(o.long_prompt_tokens));
      auto tail = tok->encode(simple_chat_prompt(p.at("instruction").get<std::string>(), false));
      // The context is a preceding user turn's content: <|im_start|>user\n{code}\n + instruction.
      std::vector<int32_t> full = tok->encode("<|im_start|>user\n");
      full.insert(full.end(), ids.begin(), ids.end());
      full.insert(full.end(), tail.begin(), tail.end());
      r.prompts.push_back(std::move(full));
    }
    if (o.n_prompts > 0 && int(r.prompts.size()) > o.n_prompts) r.prompts.resize(size_t(o.n_prompts));
    regimes.push_back(std::move(r));
  }

  nlohmann::json rows = nlohmann::json::array();
  std::fprintf(tout, "%-10s %8s %10s", "regime", "prompts", "plain t/s");
  for (int B : o.block_sizes) std::fprintf(tout, "   B=%-2d t/s  speedup  accept   tau", B);
  std::fprintf(tout, "\n");
  if (o.controller == "both")
    std::fprintf(tout, "(block-size columns: on the regime's line the controller is off, every step drafting B - 1; on "
                "the 'controller:' line it is on)\n");
  // The controller's modes to measure: the configured one, or both (--controller both).
  std::vector<bool> modes;
  if (o.controller == "both") modes = {false, true};
  else modes = {o.controller == "on" ? true : o.controller == "off" ? false : !o.no_adaptive};
  const char* mode_key[2] = {"fixed", "controller"};
  for (const auto& r : regimes) {
    std::vector<Setup> setups(1);  // [0]: plain
    for (const DFlashDraft* d : {draft.get(), draft2.get()}) {
      if (!d) continue;
      for (bool ad : modes)
        for (int B : o.block_sizes) setups.push_back(Setup{d, B, ad, {}, 0});
    }
    if (d2) d2->reset_timing();
    run_regime(*target, setups, r, stops, o.rounds);
    const Result plain = setups[0].res;
    std::fprintf(tout, "%-10s %8zu %10.1f", r.name.c_str(), r.prompts.size(), plain.tok_s);
    nlohmann::json row{{"regime", r.name}, {"prompts", r.prompts.size()}, {"plain_tok_s", plain.tok_s}};
    size_t k = 1;
    for (const DFlashDraft* dr : {draft.get(), draft2.get()}) {
      if (!dr) continue;
      const bool second = dr == draft2.get();
      for (size_t m = 0; m < modes.size(); ++m) {
        if (second || m > 0) {
          std::string label = second ? std::string(draft2->kind()) : std::string();
          if (modes.size() > 1) label += std::string(label.empty() ? "" : " ") + mode_key[modes[m]];
          std::fprintf(tout, "\n%-30s", (label + ":").c_str());
        }
        for (int B : o.block_sizes) {
          const Result d = setups[k++].res;
          const double sp = plain.tok_s > 0 ? d.tok_s / plain.tok_s : 0;
          std::fprintf(tout, "   %9.1f  %6.2fx  %5.1f%%  %5.2f", d.tok_s, sp, 100 * d.accept_rate(), d.tau());
          nlohmann::json cell{{"tok_s", d.tok_s}, {"speedup", sp}, {"accept_rate", d.accept_rate()},
                              {"tau", d.tau()}, {"steps", d.steps}, {"controller", bool(modes[m])}};
          // "dflash" / "draft2": the first mode measured (the configured one); with both modes
          // also "dflash_fixed" / "dflash_controller" (and draft2_...).
          const std::string base = second ? "draft2" : "dflash";
          if (m == 0) row[base][std::to_string(B)] = cell;
          if (modes.size() > 1) row[base + "_" + mode_key[modes[m]]][std::to_string(B)] = cell;
        }
      }
      if (second && d2 && d2->timing().blocks > 0) {
        const auto& t = d2->timing();
        const double n = double(t.blocks);
        row["draft2_cost"] = {{"blocks", t.blocks}, {"block_ms", 1e3 * t.total_s / n}, {"conv_ms", 1e3 * t.conv_s / n},
                              {"selector_ms", 1e3 * t.selector_s / n}};
        std::fprintf(tout, "\n%-10s per block: %.3f ms total, convolutions %.3f ms (%.1f%%), selector %.3f ms (%.1f%%)", "",
                    1e3 * t.total_s / n, 1e3 * t.conv_s / n, 100 * t.conv_s / t.total_s, 1e3 * t.selector_s / n,
                    100 * t.selector_s / t.total_s);
      }
    }
    std::fprintf(tout, "\n");
    std::fflush(tout);
    rows.push_back(row);
  }

  // The cost model: verify of K rows relative to one row, and the draft's time per block.
  const int ctx_len = 256;
  const double t1 = time_forward(*target, 1, ctx_len, pool, 7);
  std::fprintf(tout, "\ncost model at %d tokens of context (target forward of K rows / K=1; draft block time / K=1 forward)\n",
              ctx_len);
  std::fprintf(tout, "%4s %10s %8s %12s\n", "K", "fwd ms", "ratio", "draft ratio");
  nlohmann::json cost = nlohmann::json::array();
  for (int K = 1; K <= 16; ++K) {
    const double tk = K == 1 ? t1 : time_forward(*target, K, ctx_len, pool, 5);
    double td = 0;
    if (K >= 2) {
      auto dc = draft->new_state(ctx_len + K + 1);
      std::vector<float> feats(size_t(ctx_len) * draft->feature_dim(), 0.01f), lg(size_t(K - 1) * target->config().vocab);
      draft->add_context(*dc, feats.data(), ctx_len);
      td = 1e30;
      for (int rep = 0; rep < 5; ++rep) {
        const double t0 = now_seconds();
        draft->propose(*dc, 1, K, lg.data());
        td = std::min(td, now_seconds() - t0);
      }
    }
    std::fprintf(tout, "%4d %10.3f %8.2f %12.2f\n", K, tk * 1e3, tk / t1, td / t1);
    cost.push_back({{"K", K}, {"forward_ms", tk * 1e3}, {"ratio", tk / t1}, {"draft_ratio", td / t1}});
  }
  // Predicted speedup at each block size from the measured tau: tau tokens per (draft + verify).
  std::fprintf(tout, "\npredicted speedup = tau / (verify(B)/verify(1) + draft(B)/verify(1))\n");
  for (auto& row : rows)
    for (int B : o.block_sizes) {
      if (B > 16) continue;
      auto& d = row["dflash"][std::to_string(B)];
      const double pred = d["tau"].get<double>() / (cost[size_t(B - 1)]["ratio"].get<double>() +
                                                     cost[size_t(B - 1)]["draft_ratio"].get<double>());
      d["predicted_speedup"] = pred;
      std::fprintf(tout, "  %-10s B=%-2d tau %.2f -> predicted %.2fx, measured %.2fx\n", row["regime"].get<std::string>().c_str(),
                  B, d["tau"].get<double>(), pred, d["speedup"].get<double>());
    }
  nlohmann::json doc{{"regimes", rows}, {"cost_model", cost}};
  if (!o.predict_shapes.empty()) doc["predicted_shapes"] = predict_shapes(o, rows, pool);
  if (o.json) std::puts(doc.dump(2).c_str());
  return doc;
}

}  // namespace dflash::bench
