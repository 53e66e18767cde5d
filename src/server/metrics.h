#pragma once
// Counters behind /metrics (Prometheus text) and /v1/stats (JSON for the web page).
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "decoding/step_batcher.h"
#include "server/prompt_cache.h"

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
  BatchStats batch;                  // continuous batching (decoding/step_batcher.h)
  PromptCacheStats cache;            // the prompt cache beyond the slots (server/prompt_cache.h)
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
