#pragma once
// The server's prompt cache beyond the slots (--cache-ram): contexts of past conversations
// kept in host memory under a byte budget, least recently used first out, shared by all slots.
// A slot whose conversation is about to be replaced by another stores it here; a request that
// continues a stored conversation gets it restored into its slot instead of prefilling it
// again (usage.prompt_tokens_details.cached_tokens counts it as cached).
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <vector>

#include "decoding/generator.h"

namespace dflash::server {

struct PromptCacheStats {
  uint64_t hits = 0, misses = 0, stores = 0, evictions = 0, hit_tokens = 0;
  size_t entries = 0, bytes = 0, budget = 0;
};

class PromptCache {
 public:
  explicit PromptCache(size_t budget_bytes) : budget_(budget_bytes) {}

  // Keeps `s` (an entry with the same tokens is replaced), then drops the least recently used
  // entries until the budget holds; a snapshot larger than the budget is not kept.
  void put(std::unique_ptr<GeneratorSnapshot> s);
  // The entry that gives `prompt` the most reusable tokens, if more than `at_least`: a KV
  // cache's entry the common prefix, a recurrent state's only its whole length (the prompt must
  // extend it, one token at least). Marks it used; counts a hit, or a miss when none.
  const GeneratorSnapshot* best_for(const std::vector<int32_t>& prompt, size_t at_least, size_t* reusable = nullptr);
  PromptCacheStats stats() const;

 private:
  void evict_to(size_t budget);  // mu_ held

  const size_t budget_;
  mutable std::mutex mu_;
  std::list<std::unique_ptr<GeneratorSnapshot>> lru_;  // front: most recently used
  size_t bytes_ = 0;
  PromptCacheStats counts_;
};

}  // namespace dflash::server
