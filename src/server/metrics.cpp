#include "server/metrics.h"

#include <cstdio>
#include <cstring>
#include <sstream>

namespace dflash::server {

MemoryUse memory_use() {
  MemoryUse m;
  FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return m;
  char line[256];
  while (std::fgets(line, sizeof line, f)) {
    unsigned long long kb = 0;
    if (std::sscanf(line, "VmRSS: %llu kB", &kb) == 1) m.rss_bytes = kb * 1024;
    if (std::sscanf(line, "VmHWM: %llu kB", &kb) == 1) m.peak_rss_bytes = kb * 1024;
  }
  std::fclose(f);
  return m;
}

void Metrics::record(const RequestRecord& r) {
  std::lock_guard<std::mutex> lk(mu_);
  ++requests_;
  prompt_tokens_ += uint64_t(r.prompt_tokens);
  cached_tokens_ += uint64_t(r.cached_tokens);
  generated_ += uint64_t(r.completion_tokens);
  drafted_ += uint64_t(r.drafted);
  accepted_ += uint64_t(r.accepted);
  decode_s_ += r.decode_s;
  if (r.prefill_tok_s > 0) {
    const double n = r.prompt_tokens - r.cached_tokens;
    prefilled_ += n;
    prefill_s_ += n / r.prefill_tok_s;
  }
  if (r.think_capped) ++think_capped_;
  if (r.disconnected) ++disconnects_;
  const std::string state = r.speculation.rfind("fallback", 0) == 0 ? "fallback" : r.speculation;
  ++speculation_[state];
  last_ = r;
}

void Metrics::record_status(int status) {
  std::lock_guard<std::mutex> lk(mu_);
  ++errors_[status];
}

void Metrics::record_rejected() {
  std::lock_guard<std::mutex> lk(mu_);
  ++rejected_;
}

void Metrics::record_left_in_queue() {
  std::lock_guard<std::mutex> lk(mu_);
  ++left_in_queue_;
}

namespace {
void metric(std::ostringstream& o, const char* name, const char* type, const char* help, double v) {
  o << "# HELP " << name << ' ' << help << "\n# TYPE " << name << ' ' << type << '\n' << name << ' ' << v << '\n';
}
nlohmann::ordered_json slots_json(const Gauges& g) {
  nlohmann::ordered_json a = nlohmann::ordered_json::array();
  for (const SlotGauge& s : g.per_slot)
    a.push_back({{"busy", s.busy}, {"cached_tokens", s.cached_tokens}, {"requests", s.requests}, {"tokens", s.tokens}});
  return a;
}
}  // namespace

std::string Metrics::prometheus(const Gauges& g) const {
  std::lock_guard<std::mutex> lk(mu_);
  const MemoryUse mem = memory_use();
  std::ostringstream o;
  o.precision(10);
  metric(o, "dflash_ready", "gauge", "1 once the model is loaded.", g.ready ? 1 : 0);
  metric(o, "dflash_requests_total", "counter", "Generation requests finished (answered or abandoned).", double(requests_));
  metric(o, "dflash_prompt_tokens_total", "counter", "Prompt tokens of finished requests.", double(prompt_tokens_));
  metric(o, "dflash_cached_prompt_tokens_total", "counter", "Prompt tokens served from the KV prefix cache.",
         double(cached_tokens_));
  metric(o, "dflash_generated_tokens_total", "counter", "Tokens generated.", double(generated_));
  metric(o, "dflash_decode_tokens_per_second", "gauge", "Decode speed of the last request.", last_.decode_tok_s);
  metric(o, "dflash_decode_tokens_per_second_mean", "gauge", "Generated tokens over decode time, all requests.",
         decode_s_ > 0 ? double(generated_) / decode_s_ : 0.0);
  metric(o, "dflash_prefill_tokens_per_second", "gauge", "Prompt processing speed of the last request.",
         last_.prefill_tok_s);
  metric(o, "dflash_prefill_tokens_per_second_mean", "gauge", "Prefilled tokens over prefill time, all requests.",
         prefill_s_ > 0 ? prefilled_ / prefill_s_ : 0.0);
  metric(o, "dflash_drafted_tokens_total", "counter", "Draft tokens proposed.", double(drafted_));
  metric(o, "dflash_accepted_tokens_total", "counter", "Draft tokens the target accepted.", double(accepted_));
  metric(o, "dflash_acceptance_rate", "gauge", "Accepted over drafted tokens, all requests.",
         drafted_ ? double(accepted_) / double(drafted_) : 0.0);
  metric(o, "dflash_queue_depth", "gauge", "Requests waiting for the generator.", g.queue_depth);
  metric(o, "dflash_requests_running", "gauge", "Requests generating now (at most dflash_slots).", g.running);
  metric(o, "dflash_slots", "gauge", "Slots: requests that may generate at once (--parallel).", g.slots);
  metric(o, "dflash_batch_passes_total", "counter", "Batched passes over the weights (with --parallel > 1).",
         double(g.batch.passes));
  metric(o, "dflash_batch_rows_total", "counter", "Rows in those passes.", double(g.batch.rows));
  metric(o, "dflash_batch_sequences_total", "counter", "Sequences in those passes (mean batch: over passes).",
         double(g.batch.sequences));
  metric(o, "dflash_batch_size", "gauge", "Sequences in the latest pass.", g.batch.last_sequences);
  metric(o, "dflash_batch_goodput_tokens_per_second", "gauge",
         "Tokens all slots emitted per second over the latest passes (what a slot's draft must beat).", g.batch.goodput);
  metric(o, "dflash_batch_row_seconds", "gauge", "Seconds one more row adds to a pass like the latest (a draft block's price).",
         g.batch.row_s);
  metric(o, "dflash_batch_draft_passes_total", "counter", "Draft passes (each runs the blocks of every slot drafting at that step).",
         double(g.batch.draft_passes));
  metric(o, "dflash_batch_draft_blocks_total", "counter", "Draft blocks in those passes (blocks per draft pass: over passes).",
         double(g.batch.draft_jobs));
  metric(o, "dflash_prompt_cache_hits_total", "counter", "Requests whose prompt continued a conversation restored from --cache-ram.",
         double(g.cache.hits));
  metric(o, "dflash_prompt_cache_misses_total", "counter", "New conversations for a slot with nothing in the prompt cache.",
         double(g.cache.misses));
  metric(o, "dflash_prompt_cache_hit_tokens_total", "counter", "Prompt tokens served from restored contexts.",
         double(g.cache.hit_tokens));
  metric(o, "dflash_prompt_cache_entries", "gauge", "Contexts held in the prompt cache.", double(g.cache.entries));
  metric(o, "dflash_prompt_cache_bytes", "gauge", "Bytes they hold.", double(g.cache.bytes));
  metric(o, "dflash_prompt_cache_budget_bytes", "gauge", "--cache-ram.", double(g.cache.budget));
  metric(o, "dflash_prompt_cache_evictions_total", "counter", "Contexts dropped to stay within the budget.",
         double(g.cache.evictions));
  o << "# HELP dflash_slot_busy 1 while the slot generates.\n# TYPE dflash_slot_busy gauge\n";
  for (size_t i = 0; i < g.per_slot.size(); ++i) o << "dflash_slot_busy{slot=\"" << i << "\"} " << (g.per_slot[i].busy ? 1 : 0) << '\n';
  o << "# HELP dflash_slot_cached_tokens Context positions an idle slot holds for prefix reuse (-1 while busy).\n"
       "# TYPE dflash_slot_cached_tokens gauge\n";
  for (size_t i = 0; i < g.per_slot.size(); ++i)
    o << "dflash_slot_cached_tokens{slot=\"" << i << "\"} " << g.per_slot[i].cached_tokens << '\n';
  o << "# HELP dflash_slot_requests_total Requests the slot has run.\n# TYPE dflash_slot_requests_total counter\n";
  for (size_t i = 0; i < g.per_slot.size(); ++i)
    o << "dflash_slot_requests_total{slot=\"" << i << "\"} " << g.per_slot[i].requests << '\n';
  o << "# HELP dflash_slot_generated_tokens_total Tokens the slot has generated.\n"
       "# TYPE dflash_slot_generated_tokens_total counter\n";
  for (size_t i = 0; i < g.per_slot.size(); ++i)
    o << "dflash_slot_generated_tokens_total{slot=\"" << i << "\"} " << g.per_slot[i].tokens << '\n';
  metric(o, "dflash_queue_rejections_total", "counter", "Requests refused with 503 because the queue was full.",
         double(rejected_));
  metric(o, "dflash_think_capped_total", "counter", "Requests whose thinking hit the cap.", double(think_capped_));
  metric(o, "dflash_disconnects_total", "counter", "Requests whose client left before the end (queued or running).",
         double(disconnects_));
  metric(o, "dflash_queue_abandoned_total", "counter", "Requests whose client left while they waited in the queue.",
         double(left_in_queue_));
  metric(o, "dflash_open_connections", "gauge", "HTTP connections open now.", double(g.open_connections));
  metric(o, "dflash_connections_refused_total", "counter", "Connections refused past --max-conns-per-client.",
         double(g.refused_connections));
  metric(o, "dflash_request_timeouts_total", "counter", "Requests whose headers or body came too slowly (408).",
         double(g.timed_out_requests));
  o << "# HELP dflash_speculation_requests_total Requests by speculation state.\n"
       "# TYPE dflash_speculation_requests_total counter\n";
  for (const char* s : {"on", "off", "fallback"}) {
    auto it = speculation_.find(s);
    o << "dflash_speculation_requests_total{state=\"" << s << "\"} " << (it == speculation_.end() ? 0 : it->second)
      << '\n';
  }
  o << "# HELP dflash_http_errors_total Answers with an error status.\n# TYPE dflash_http_errors_total counter\n";
  for (const auto& [status, n] : errors_) o << "dflash_http_errors_total{status=\"" << status << "\"} " << n << '\n';
  metric(o, "dflash_resident_memory_bytes", "gauge", "Resident set size.", double(mem.rss_bytes));
  metric(o, "dflash_peak_resident_memory_bytes", "gauge", "Peak resident set size.", double(mem.peak_rss_bytes));
  return o.str();
}

nlohmann::ordered_json Metrics::stats(const Gauges& g) const {
  std::lock_guard<std::mutex> lk(mu_);
  const MemoryUse mem = memory_use();
  nlohmann::ordered_json spec = nlohmann::ordered_json::object();
  for (const auto& [k, v] : speculation_) spec[k] = v;
  return {{"ready", g.ready},
          {"requests", requests_},
          {"prompt_tokens", prompt_tokens_},
          {"cached_prompt_tokens", cached_tokens_},
          {"generated_tokens", generated_},
          {"drafted", drafted_},
          {"accepted", accepted_},
          {"accept_rate", drafted_ ? double(accepted_) / double(drafted_) : 0.0},
          {"decode_tok_per_s_mean", decode_s_ > 0 ? double(generated_) / decode_s_ : 0.0},
          {"prefill_tok_per_s_mean", prefill_s_ > 0 ? prefilled_ / prefill_s_ : 0.0},
          {"queue_depth", g.queue_depth},
          {"running", g.running},
          {"slots", g.slots},
          {"batch", {{"passes", g.batch.passes},
                     {"rows", g.batch.rows},
                     {"sequences", g.batch.sequences},
                     {"last_sequences", g.batch.last_sequences},
                     {"last_rows", g.batch.last_rows},
                     {"goodput_tok_per_s", g.batch.goodput},
                     {"row_seconds", g.batch.row_s},
                     {"draft_passes", g.batch.draft_passes},
                     {"draft_blocks", g.batch.draft_jobs}}},
          {"per_slot", slots_json(g)},
          {"prompt_cache", {{"hits", g.cache.hits},
                            {"misses", g.cache.misses},
                            {"hit_tokens", g.cache.hit_tokens},
                            {"stores", g.cache.stores},
                            {"evictions", g.cache.evictions},
                            {"entries", g.cache.entries},
                            {"bytes", g.cache.bytes},
                            {"budget_bytes", g.cache.budget}}},
          {"rejected", rejected_},
          {"think_capped", think_capped_},
          {"disconnects", disconnects_},
          {"left_in_queue", left_in_queue_},
          {"open_connections", g.open_connections},
          {"refused_connections", g.refused_connections},
          {"request_timeouts", g.timed_out_requests},
          {"speculation", spec},
          {"rss_bytes", mem.rss_bytes},
          {"peak_rss_bytes", mem.peak_rss_bytes}};
}

}  // namespace dflash::server
