#pragma once
// Counters behind /metrics (Prometheus text) and /v1/stats (JSON for the web page).
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace dflash::server {

struct RequestRecord {
  int prompt_tokens = 0, cached_tokens = 0, completion_tokens = 0;
  double decode_tok_s = 0, prefill_tok_s = 0, ttft_s = 0, total_s = 0, decode_s = 0;
  long drafted = 0, accepted = 0;
  std::string speculation = "off";  // on | off | fallback:<reason>
  bool think_capped = false, disconnected = false;
};

// What /metrics and /v1/stats read from the server at scrape time, beside the counters.
struct SlotGauge {
  bool busy = false;
  int cached_tokens = 0;             // -1 while busy (its state is its thread's)
  uint64_t requests = 0, tokens = 0;
};

struct Gauges {
  int queue_depth = 0, running = 0, slots = 1;
  bool ready = false;
  std::vector<SlotGauge> per_slot;
  // Continuous batching (decoding/step_batcher.h): passes over the weights and what they held.
  uint64_t batch_passes = 0, batch_rows = 0, batch_sequences = 0;
  int last_batch_sequences = 0, last_batch_rows = 0;
  bool speculation_allowed = true;   // the batch's goodput gate (decoding/batch_spec_gate.h)
  // The prompt cache beyond the slots (server/prompt_cache.h).
  uint64_t cache_hits = 0, cache_misses = 0, cache_hit_tokens = 0, cache_stores = 0, cache_evictions = 0;
  uint64_t cache_entries = 0, cache_bytes = 0, cache_budget = 0;
  uint64_t open_connections = 0, refused_connections = 0, timed_out_requests = 0;
};

struct MemoryUse {
  uint64_t rss_bytes = 0, peak_rss_bytes = 0;
};
MemoryUse memory_use();  // from /proc/self/status

class Metrics {
 public:
  void record(const RequestRecord& r);
  void record_status(int status);  // every HTTP answer with status >= 400
  void record_rejected();          // refused because the queue was full
  void record_left_in_queue();     // the client left before its request's turn came

  std::string prometheus(const Gauges& g) const;
  nlohmann::ordered_json stats(const Gauges& g) const;

 private:
  mutable std::mutex mu_;
  uint64_t requests_ = 0, prompt_tokens_ = 0, cached_tokens_ = 0, generated_ = 0;
  uint64_t drafted_ = 0, accepted_ = 0, think_capped_ = 0, disconnects_ = 0, rejected_ = 0;
  uint64_t left_in_queue_ = 0;
  double decode_s_ = 0, prefill_s_ = 0, prefilled_ = 0;
  RequestRecord last_;
  std::map<std::string, uint64_t> speculation_;  // on | off | fallback
  std::map<int, uint64_t> errors_;
};

}  // namespace dflash::server
