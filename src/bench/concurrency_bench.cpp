#include "bench/concurrency_bench.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <thread>

#include <unistd.h>

#include "bench/llamacpp_bench.h"
#include "bench/model_speed.h"
#include "chat/simple_chat_prompt.h"
#include "decoding/speculative.h"
#include "decoding/step_batcher.h"
#include "formats/gguf.h"
#include "formats/json_file.h"
#include "models/kv_cache.h"
#include "models/model_files.h"
#include "models/model_pair.h"
#include "util/error.h"
#include "util/peak_rss.h"
#include "util/timer.h"

namespace dflash::bench {

namespace {

struct LevelResult {
  double wall_s = 1e30;
  long tokens = 0, drafted = 0, accepted = 0;
  std::vector<double> latency_s;  // per request, start to last token
  BatchStats batch;               // the passes: how many, how full, how long
  // The window in which every stream was decoding: from the last stream's first token to the
  // first stream's last token, and the tokens all streams emitted inside it (llama.cpp's
  // batched-bench S_TG, for streams that overlap). The wall time above also holds each
  // prompt's prefill, which is compute-bound and gains nothing from batching, so the scaling
  // of batched decode itself shows here.
  double steady_s = 0;
  long steady_tokens = 0;
  double agg_tok_s() const { return wall_s > 0 ? double(tokens) / wall_s : 0; }
  double steady_tok_s() const { return steady_s > 0 ? double(steady_tokens) / steady_s : 0; }
};

// Each stream's token times (one entry per token, the time its step returned).
void measure_steady(const std::vector<std::vector<double>>& token_times, LevelResult& r) {
  double from = 0, to = 1e300;
  for (const auto& t : token_times) {
    if (t.size() < 2) return;  // a stream that never decoded: no window
    from = std::max(from, t.front());
    to = std::min(to, t.back());
  }
  if (to <= from) return;
  long n = 0;
  for (const auto& t : token_times)
    for (double x : t) n += x > from && x <= to;
  // Fewer tokens than streams: they barely overlapped (seen on the demo pair: a window of 8 us
  // holding one token of 2 streams), not a window in which all decoded.
  if (n < long(token_times.size())) return;
  r.steady_s = to - from;
  r.steady_tokens = n;
}

double mean(const std::vector<double>& v) {
  double sum = 0;
  for (double x : v) sum += x;
  return v.empty() ? 0 : sum / double(v.size());
}

// Linear between the two nearest ranks: of an even count the median is the mean of the middle
// two. (Before 2026-12-07 the nearest rank, rounding up: of 8 rounds the 5th, the upper of the
// middle two, which put every paired median of an even round count on its high side.)
double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double pos = std::clamp(q, 0.0, 1.0) * double(v.size() - 1);
  const size_t lo = size_t(pos), hi = std::min(v.size() - 1, lo + 1);
  return v[lo] + (pos - double(lo)) * (v[hi] - v[lo]);
}

// A batcher's totals over one round: its passes since `before`.
BatchStats since(const BatchStats& now, const BatchStats& before) {
  BatchStats d = now;
  d.passes -= before.passes;
  d.rows -= before.rows;
  d.sequences -= before.sequences;
  d.pass_s -= before.pass_s;
  d.draft_passes -= before.draft_passes;
  d.draft_jobs -= before.draft_jobs;
  d.draft_pass_s -= before.draft_pass_s;
  return d;
}

// An interval for the median of the rounds' ratios that assumes nothing of their spread: the
// k-th smallest and the k-th largest, k the largest rank for which the true median lies
// between them with a chance of at least 90% (it lies below the k-th smallest of n when fewer
// than k of n fair coins land heads): of 5 or 6 rounds the least and the most, of 8 the 2nd
// and 7th (93%), of 10 the 2nd and 9th (98%; the 3rd and 8th hold 89%). Under 5 rounds no
// interval reaches 90% (coverage 0). Where it holds 1.0 the rounds cannot tell speculation
// from plain decoding on this machine; a single median moves by the noise of a few rounds.
struct MedianInterval {
  double low = 0, high = 0, coverage = 0;
};
MedianInterval median_interval(std::vector<double> v) {
  MedianInterval m;
  const int n = int(v.size());
  if (n == 0) return m;
  std::sort(v.begin(), v.end());
  double below = 0, choose = 1;  // P(fewer than k heads), C(n, k - 1)
  const double all = std::ldexp(1.0, n);
  for (int k = 1; 2 * k <= n + 1; ++k) {
    below += choose / all;
    choose = choose * double(n - k + 1) / double(k);
    const double coverage = 1 - 2 * below;
    if (coverage < 0.90) break;
    m = MedianInterval{v[size_t(k - 1)], v[size_t(n - k)], coverage};
  }
  return m;
}

// A slot's generator for each of `streams` slots, batched through `batcher` (speculative with
// `draft`), with room for the longest prompt and the tokens of a request.
int slot_context(const std::vector<std::vector<int32_t>>& prompts, const ConcurrencyBenchOptions& o) {
  size_t longest = 0;
  for (const auto& p : prompts) longest = std::max(longest, p.size());
  return int(longest) + o.gen_tokens + 32;
}

std::vector<std::unique_ptr<Generator>> make_slots(const TargetModel& target, const DFlashDraft* draft, int streams,
                                                   StepBatcher& batcher, const std::vector<std::vector<int32_t>>& prompts,
                                                   const ConcurrencyBenchOptions& o) {
  const int ctx = slot_context(prompts, o);
  std::vector<std::unique_ptr<Generator>> gens;
  for (int s = 0; s < streams; ++s) {
    if (draft) {
      SpecParams sp;
      sp.block_size = o.block_size > 0 ? o.block_size : draft->config().block_size;
      sp.adaptive = o.adaptive;
      gens.push_back(std::make_unique<SpeculativeGenerator>(target, *draft, ctx, sp));
    } else {
      gens.push_back(std::make_unique<Generator>(target, ctx));
    }
    gens.back()->set_batcher(&batcher);
  }
  return gens;
}

// One request on each of the slots `gens` at once, request i on prompt i (mod the prompts),
// every pass batched through `batcher`; wall time from the first start to the last token.
LevelResult run_level(std::vector<std::unique_ptr<Generator>>& gens, StepBatcher& batcher,
                      const std::vector<std::vector<int32_t>>& prompts, const ConcurrencyBenchOptions& o,
                      const std::vector<int32_t>& stops) {
  const int streams = int(gens.size());
  const BatchStats before = batcher.stats();
  LevelResult r;
  r.latency_s.assign(size_t(streams), 0);
  std::vector<std::vector<double>> token_times(static_cast<size_t>(streams));
  std::vector<std::string> errors(static_cast<size_t>(streams));
  const double t0 = now_seconds();
  std::vector<std::thread> threads;
  for (int s = 0; s < streams; ++s)
    threads.emplace_back([&, s] {
      try {
        StepBatcher::Slot in_batch(&batcher);
        GenerateParams gp;
        gp.max_tokens = o.gen_tokens;
        gp.horizon = o.gen_tokens;
        gp.stop_ids = stops;
        gp.ignore_eos = true;  // every request runs its full length: the streams overlap throughout
        Generator& g = *gens[size_t(s)];
        g.start(prompts[size_t(s) % prompts.size()], gp);
        std::vector<int32_t> out;
        auto& times = token_times[size_t(s)];
        times.reserve(size_t(o.gen_tokens) + 16);
        for (bool more = true; more;) {
          const size_t before = out.size();
          more = g.step(out);
          const double t = now_seconds();
          times.insert(times.end(), out.size() - before, t);
        }
        r.latency_s[size_t(s)] = now_seconds() - t0;
      } catch (const std::exception& e) {
        errors[size_t(s)] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  r.wall_s = now_seconds() - t0;
  r.batch = since(batcher.stats(), before);
  for (const auto& e : errors)
    if (!e.empty()) throw Error("bench --concurrency: a request failed: " + e);
  measure_steady(token_times, r);
  for (const auto& g : gens) {
    r.tokens += g->generated();
    if (auto* sg = dynamic_cast<const SpeculativeGenerator*>(g.get())) {
      r.drafted += sg->stats().drafted;
      r.accepted += sg->stats().accepted;
    }
  }
  return r;
}

// One run of a round: its time and its work (rows of the target's passes, prompt and decode).
nlohmann::json round_json(const LevelResult& r) {
  return {{"wall_s", r.wall_s}, {"tokens", r.tokens}, {"passes", r.batch.passes}, {"rows", r.batch.rows},
          {"draft_passes", r.batch.draft_passes}, {"drafted", r.drafted}, {"accepted", r.accepted}};
}

nlohmann::json to_json(const LevelResult& r) {
  return {{"aggregate_tok_s", r.agg_tok_s()}, {"wall_s", r.wall_s}, {"tokens", r.tokens},
          {"steady_tok_s", r.steady_tok_s()}, {"steady_s", r.steady_s}, {"steady_tokens", r.steady_tokens},
          {"latency_p50_s", percentile(r.latency_s, 0.5)}, {"latency_max_s", percentile(r.latency_s, 1.0)},
          {"latency_mean_s", mean(r.latency_s)},
          {"drafted", r.drafted}, {"accepted", r.accepted},
          {"accept_rate", r.drafted ? double(r.accepted) / double(r.drafted) : 0.0},
          {"passes", r.batch.passes}, {"sequences_per_pass", r.batch.passes ? double(r.batch.sequences) / double(r.batch.passes) : 0.0},
          {"rows_per_pass", r.batch.passes ? double(r.batch.rows) / double(r.batch.passes) : 0.0},
          {"pass_share_of_wall", r.wall_s > 0 ? r.batch.pass_s / r.wall_s : 0.0},
          {"draft_passes", r.batch.draft_passes},
          {"blocks_per_draft_pass", r.batch.draft_passes ? double(r.batch.draft_jobs) / double(r.batch.draft_passes) : 0.0},
          {"draft_share_of_wall", r.wall_s > 0 ? r.batch.draft_pass_s / r.wall_s : 0.0}};
}

// One level: a batcher per mode and a generator a slot, kept across the rounds as a server
// keeps them for its life (the prices of passes and draft passes measured and the batch's
// probe account carry from round to round, and the slots' grown buffers; only the first round
// starts cold. A fresh batcher each round, before 2026-12-07, priced every round's first
// probes from priors: at 8 streams on the grown 1.7B pair 3 rows past 8 at 3.7-4.8 ms, 12.4 ms
// once measured), and what its rounds measured.
struct LevelRun {
  int streams = 0;
  std::unique_ptr<StepBatcher> plain_batcher, spec_batcher;
  std::vector<std::unique_ptr<Generator>> plain_slots, spec_slots;
  LevelResult plain, spec;          // the best round of each mode
  double steady_best[2] = {0, 0};   // plain, speculative: the best round's all-decoding tok/s
  // Each round's two runs back to back give a ratio of their own: the median of those is what
  // a slow stretch of a few seconds (seen: one mode's best round 20% off the other's with
  // identical passes) moves least. paired_latency: each round's plain mean request latency
  // over speculative's. The wall time of a closed batch is its slowest request's; where one
  // slot drafts and finishes early, the others (slowed by its blocks) finish later and nobody
  // takes the freed slot, while the mean latency (what the controller's goodput serves) falls.
  std::vector<double> paired, paired_steady, paired_latency;
  std::vector<long> drafted_by_round;      // the speculative run's drafted tokens, round by round
  std::vector<double> tok_s_by_round[2];   // plain, speculative: each round's tok/s end to end
  // Each round's two runs, their work beside their time: where the speculative run drafted
  // nothing, it read the same prompt and decode rows as the plain run (only how they fell
  // into passes can differ, with the threads' timing), so its ratio is the machine's noise.
  nlohmann::json by_round = nlohmann::json::array();
};

// A round of one level. Plain and speculative alternate round by round which runs first: on
// this kind of machine the second of two back-to-back runs tends to be the slower one (clock
// and cache state), and a fixed order put that on speculation every time.
void run_round(LevelRun& L, int round, bool draft, const std::vector<std::vector<int32_t>>& prompts,
               const ConcurrencyBenchOptions& o, const std::vector<int32_t>& stops) {
  double wall[2] = {0, 0}, steady[2] = {0, 0}, latency[2] = {0, 0};
  nlohmann::json this_round = nlohmann::json::object();
  for (int k = 0; k < 2; ++k) {
    const bool spec_now = (k == 0) == (round % 2 == 1);
    if (spec_now && !draft) continue;
    const int m = spec_now ? 1 : 0;
    LevelResult r = run_level(spec_now ? L.spec_slots : L.plain_slots, spec_now ? *L.spec_batcher : *L.plain_batcher,
                              prompts, o, stops);
    wall[m] = r.wall_s;
    steady[m] = r.steady_tok_s();
    latency[m] = mean(r.latency_s);
    L.tok_s_by_round[m].push_back(r.agg_tok_s());
    if (spec_now) L.drafted_by_round.push_back(r.drafted);
    this_round[spec_now ? "dflash" : "plain"] = round_json(r);
    L.steady_best[m] = std::max(L.steady_best[m], r.steady_tok_s());
    LevelResult& best = spec_now ? L.spec : L.plain;
    if (r.wall_s < best.wall_s) best = r;
  }
  if (draft && wall[1] > 0) L.paired.push_back(wall[0] / wall[1]);  // the same tokens: speeds' ratio
  if (draft && steady[0] > 0 && steady[1] > 0) L.paired_steady.push_back(steady[1] / steady[0]);
  if (draft && latency[1] > 0) L.paired_latency.push_back(latency[0] / latency[1]);
  this_round["first"] = (round % 2 == 1 && draft) ? "dflash" : "plain";
  L.by_round.push_back(this_round);
}

nlohmann::json interval_json(const std::vector<double>& v) {
  const MedianInterval mi = median_interval(v);
  return {{"low", mi.low}, {"high", mi.high}, {"coverage", mi.coverage}};
}

// While every stream decodes (each level's best round; paired: the median of each round's
// dflash/plain): the scaling of batched decode without the prompts' prefill.
void print_steady_table(const nlohmann::json& levels, bool spec) {
  std::printf("\nwhile all streams decode (from the last stream's first token to the first stream's last), tok/s:\n");
  std::printf("%7s %12s %8s", "streams", "plain", "vs 1");
  if (spec) std::printf(" %12s %8s %9s", "dflash", "vs 1", "(paired)");
  std::printf("\n");
  const double p1 = levels[0].value("plain_steady_tok_s_best", 0.0), s1 = levels[0].value("dflash_steady_tok_s_best", 0.0);
  for (const auto& lv : levels) {
    const double p = lv.value("plain_steady_tok_s_best", 0.0);
    std::printf("%7d %12.2f %7.2fx", lv.value("streams", 0), p, p1 > 0 ? p / p1 : 0.0);
    if (spec) {
      const double d = lv.value("dflash_steady_tok_s_best", 0.0);
      std::printf(" %12.2f %7.2fx %8.2fx", d, s1 > 0 ? d / s1 : 0.0, lv.value("dflash_over_plain_steady_paired_median", 0.0));
    }
    std::printf("\n");
  }
}

// An interval's cells (median_interval's, as JSON): low - high and its chance, or none.
void print_interval_cells(const nlohmann::json& in, int decimals) {
  if (in.value("coverage", 0.0) > 0)
    std::printf("   %8.*fx - %7.*fx %6.1f%%", decimals, in.value("low", 0.0), decimals, in.value("high", 0.0),
                100 * in.value("coverage", 0.0));
  else
    std::printf(" %21s %7s", "(under 5 rounds)", "-");
}

// Each level's tok/s over the first level's, paired by round (every round runs every level):
// the scaling with the minute's memory speed taken out, plain with its interval.
void print_scaling_table(const nlohmann::json& levels, bool spec) {
  std::printf("\ntok/s over the first level's (%d stream%s), paired by round (each round runs every level): the "
              "median and, for plain, its interval (order statistics, as below)\n",
              levels[0].value("streams", 0), levels[0].value("streams", 0) == 1 ? "" : "s");
  std::printf("%7s %9s %21s %7s", "streams", "plain", "interval", "chance");
  if (spec) std::printf(" %9s", "dflash");
  std::printf("\n");
  for (const auto& lv : levels) {
    std::printf("%7d %8.2fx", lv.value("streams", 0), lv.value("plain_over_first_level_paired_median", 0.0));
    print_interval_cells(lv.at("plain_over_first_level_paired_interval"), 2);
    if (spec) std::printf(" %8.2fx", lv.value("dflash_over_first_level_paired_median", 0.0));
    std::printf("\n");
  }
}

// Each level's paired median with its interval (median_interval): what the rounds can tell.
void print_interval_table(const nlohmann::json& levels) {
  std::printf("\ndflash/plain paired by round: the median and an interval that holds the true median with the "
              "chance shown (order statistics)\n");
  std::printf("%7s %9s %21s %7s %s\n", "streams", "median", "interval", "chance", "rounds");
  for (const auto& lv : levels) {
    std::printf("%7d %8.3fx", lv.value("streams", 0), lv.value("dflash_over_plain_paired_median", 0.0));
    print_interval_cells(lv.at("dflash_over_plain_paired_interval"), 3);
    std::printf(" %zu\n", lv.at("dflash_over_plain_paired").size());
  }
}

}  // namespace

nlohmann::json run_concurrency_bench(const ConcurrencyBenchOptions& o) {
  const std::string dir = resolve_model_dir(o.model);
  ModelPair pair = load_bench_pair(dir, o.draft, o.weights, o.threads, parse_kv_type(o.cache_type));
  if (!pair.tokenizer) throw file_error(dir, "missing tokenizer.json (the bench tokenizes its prompts)");
  const std::string pf = o.prompts_file.empty() ? dir + "/../bench_prompts.json" : o.prompts_file;
  const auto pj = read_json_file(pf);
  std::vector<std::vector<int32_t>> prompts;
  for (const auto& p : pj.at("code")) prompts.push_back(pair.tokenizer->encode(simple_chat_prompt(p.get<std::string>(), false)));
  if (prompts.empty()) throw file_error(pf, "no \"code\" prompts");
  for (int c : o.levels)
    if (c < 1 || c > 256) throw Error("--concurrency levels must be 1..256");

  if (o.vs_llamacpp && !has_gguf_suffix(dir))
    throw Error("bench --concurrency --vs-llamacpp: --model must be a .gguf file (both engines read the same file)");
  const DFlashDraft* draft = pair.draft.get();
  nlohmann::json levels = nlohmann::json::array();
  double plain1 = 0, spec1 = 0;
  if (!o.json) {
    std::printf("concurrency: %s%s%s, %d tokens per request, %d threads, %s KV cache, greedy, best of %d round(s); "
                "paired: the median of the rounds' dflash/plain\n",
                dir.c_str(), draft ? " + " : "", draft ? o.draft.c_str() : "", o.gen_tokens, pair.backend->threads(),
                o.cache_type.c_str(), o.rounds);
    std::printf("%7s %12s %8s %12s %8s %9s %9s %8s %17s %17s\n", "streams", "plain tok/s", "vs 1", "dflash tok/s",
                "vs 1", "dflash/", "(paired)", "accept", "plain p50/max s", "dflash p50/max s");
  }
  // Every level's slots live through all rounds: refuse what would not fit before making them.
  const int ctx = slot_context(prompts, o);
  const size_t target_slot = pair.target->new_state(ctx)->bytes();  // a plain slot; a speculative one adds the draft's
  const size_t per_slot = target_slot + (draft ? target_slot + draft->new_state(ctx)->bytes() : 0);
  size_t slots = 0;
  for (int c : o.levels) slots += size_t(c);
  const uint64_t avail = available_memory_bytes();
  if (avail > 0 && double(per_slot) * double(slots) > 0.75 * double(avail))
    throw Error("bench --concurrency: the slots of every level at once (" + std::to_string(slots) + " a mode, " +
                std::to_string(per_slot >> 20) + " MiB a slot in every mode) need more than 3/4 of the free memory (" +
                std::to_string(avail >> 20) + " MiB); measure fewer levels at a time");
  std::vector<std::unique_ptr<LevelRun>> runs;
  for (int c : o.levels) {
    auto L = std::make_unique<LevelRun>();
    L->streams = c;
    L->plain_batcher = std::make_unique<StepBatcher>(*pair.target);
    L->spec_batcher = std::make_unique<StepBatcher>(*pair.target);
    L->plain_slots = make_slots(*pair.target, nullptr, c, *L->plain_batcher, prompts, o);
    if (draft) L->spec_slots = make_slots(*pair.target, draft, c, *L->spec_batcher, prompts, o);
    runs.push_back(std::move(L));
  }
  // Rounds outside, levels inside: each round runs every level, ascending in even rounds and
  // descending in odd ones, so that a level's ratio to the first level can be paired by round
  // like dflash/plain. Levels one after the other (before 2026-12-07) put minutes between one
  // stream and eight, and this machine's memory moves by a third between minutes: the grown
  // 4B pair's one stream ran at 22.7 tok/s in one run and 17.7 in another, 8 streams at 77 and
  // 74, so 8 streams made 3.39x one stream in the first and 4.18x in the second.
  const int rounds = std::max(1, o.rounds);
  const double t_start = now_seconds();
  for (int round = 0; round < rounds; ++round) {
    for (size_t i = 0; i < runs.size(); ++i)
      run_round(*runs[round % 2 == 0 ? i : runs.size() - 1 - i], round, draft != nullptr, prompts, o, pair.stop_ids);
    if (!o.json && rounds > 1)
      std::fprintf(stderr, "bench --concurrency: round %d of %d done (%.0f s)\n", round + 1, rounds, now_seconds() - t_start);
  }
  const LevelRun& first = *runs.front();
  for (const auto& Lp : runs) {
    const LevelRun& L = *Lp;
    const int c = L.streams;
    const LevelResult &plain = L.plain, &spec = L.spec;
    if (&L == &first) {
      plain1 = plain.agg_tok_s();
      spec1 = draft ? spec.agg_tok_s() : 0;
    }
    // Each round's tok/s of this level over the first level's in the same round.
    std::vector<double> scaling[2];
    for (int m = 0; m < (draft ? 2 : 1); ++m)
      for (size_t r = 0; r < L.tok_s_by_round[m].size() && r < first.tok_s_by_round[m].size(); ++r)
        if (first.tok_s_by_round[m][r] > 0) scaling[m].push_back(L.tok_s_by_round[m][r] / first.tok_s_by_round[m][r]);
    const double paired_median = percentile(L.paired, 0.5);
    nlohmann::json row{{"streams", c}, {"plain", to_json(plain)}, {"plain_steady_tok_s_best", L.steady_best[0]},
                       {"plain_over_first_level_paired", scaling[0]},
                       {"plain_over_first_level_paired_median", percentile(scaling[0], 0.5)},
                       {"plain_over_first_level_paired_interval", interval_json(scaling[0])},
                       {"by_round", L.by_round}};
    if (draft) {
      row["dflash"] = to_json(spec);
      row["dflash_over_plain_paired"] = L.paired;  // per round, dflash tok/s over plain's
      row["dflash_over_plain_paired_median"] = paired_median;
      row["dflash_over_plain_paired_interval"] = interval_json(L.paired);
      row["dflash_over_first_level_paired"] = scaling[1];
      row["dflash_over_first_level_paired_median"] = percentile(scaling[1], 0.5);
      row["dflash_steady_tok_s_best"] = L.steady_best[1];
      row["dflash_over_plain_steady_paired"] = L.paired_steady;
      row["dflash_over_plain_steady_paired_median"] = percentile(L.paired_steady, 0.5);
      row["dflash_drafted_by_round"] = L.drafted_by_round;
      row["plain_over_dflash_mean_latency_paired"] = L.paired_latency;
      row["plain_over_dflash_mean_latency_paired_median"] = percentile(L.paired_latency, 0.5);
    }
    levels.push_back(row);
    if (o.json) continue;
    std::printf("%7d %12.2f %7.2fx", c, plain.agg_tok_s(), plain1 > 0 ? plain.agg_tok_s() / plain1 : 0.0);
    if (draft)
      std::printf(" %12.2f %7.2fx %8.2fx %8.2fx %7.1f%%", spec.agg_tok_s(), spec1 > 0 ? spec.agg_tok_s() / spec1 : 0.0,
                  spec.agg_tok_s() / plain.agg_tok_s(), paired_median,
                  100.0 * double(spec.accepted) / double(std::max(1L, spec.drafted)));
    else
      std::printf(" %12s %8s %9s %9s %8s", "-", "-", "-", "-", "-");
    std::printf(" %8.2f/%-8.2f", percentile(plain.latency_s, 0.5), percentile(plain.latency_s, 1.0));
    if (draft) std::printf(" %8.2f/%-8.2f", percentile(spec.latency_s, 0.5), percentile(spec.latency_s, 1.0));
    std::printf("\n");
    std::fflush(stdout);
  }
  if (!o.json && !levels.empty()) print_steady_table(levels, draft != nullptr);
  if (!o.json && !levels.empty()) print_scaling_table(levels, draft != nullptr);
  if (!o.json && !levels.empty() && draft) print_interval_table(levels);
  nlohmann::json peer;
  if (o.vs_llamacpp) {
    // The same token ids for llama.cpp, through a temporary file.
    const char* t = std::getenv("TMPDIR");
    const std::string pfile = std::string(t && *t ? t : "/tmp") + "/dflash_concurrency_prompts_" + std::to_string(::getpid()) + ".json";
    {
      std::ofstream f(pfile, std::ios::binary);
      f << nlohmann::json(prompts).dump();
      if (!f) throw Error("bench --concurrency: cannot write " + pfile);
    }
    std::string levels_arg;
    for (int c : o.levels) levels_arg += (levels_arg.empty() ? "" : ",") + std::to_string(c);
    try {
      peer = run_llamacpp_peer(find_dflash_root(), {"concurrency", "--model", dir, "--prompts", pfile, "--streams", levels_arg,
                                                    "--tg", std::to_string(o.gen_tokens), "--threads",
                                                    std::to_string(pair.backend->threads()), "--reps", std::to_string(std::max(1, o.rounds))});
    } catch (...) {
      std::remove(pfile.c_str());
      throw;
    }
    std::remove(pfile.c_str());
    if (!o.json) {
      std::printf("\nllama.cpp (node-llama-cpp), the same file and prompts, batched sequences, greedy:\n");
      std::printf("%7s %12s %8s %17s %12s\n", "streams", "tok/s", "vs 1", "p50/max s", "dflash/llama");
      const auto& pl = peer.at("levels");
      const double l1 = pl.empty() ? 0 : pl[0].value("aggregate_tok_s", 0.0);
      for (size_t i = 0; i < pl.size() && i < levels.size(); ++i) {
        const double a = pl[i].value("aggregate_tok_s", 0.0);
        const double best_dflash = std::max(levels[i]["plain"]["aggregate_tok_s"].get<double>(),
                                            levels[i].contains("dflash") ? levels[i]["dflash"]["aggregate_tok_s"].get<double>() : 0.0);
        std::printf("%7d %12.2f %7.2fx %8.2f/%-8.2f %11.2fx\n", pl[i].value("streams", 0), a, l1 > 0 ? a / l1 : 0.0,
                    pl[i].value("latency_p50_ms", 0.0) / 1e3, pl[i].value("latency_max_ms", 0.0) / 1e3,
                    a > 0 ? best_dflash / a : 0.0);
      }
    }
  }
  nlohmann::json doc{{"bench", "concurrency"}, {"model", dir}, {"draft", o.draft}, {"weights", o.weights},
                     {"gen_tokens", o.gen_tokens}, {"threads", pair.backend->threads()}, {"cache_type", o.cache_type},
                     {"rounds", std::max(1, o.rounds)}, {"levels", levels}};
  if (!peer.is_null()) doc["llamacpp"] = peer;
  if (o.json) std::printf("%s\n", doc.dump(2).c_str());
  return doc;
}

}  // namespace dflash::bench
