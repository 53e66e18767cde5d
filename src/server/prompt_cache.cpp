#include "server/prompt_cache.h"

namespace dflash::server {

namespace {
size_t common_prefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  size_t n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
  return n;
}

// Tokens of `prompt` a restored `s` serves: the prompt's last token always goes through the
// model (its logits), so at most prompt.size() - 1.
size_t reusable_tokens(const GeneratorSnapshot& s, const std::vector<int32_t>& prompt) {
  if (prompt.empty()) return 0;
  const size_t common = std::min(common_prefix(s.tokens, prompt), prompt.size() - 1);
  const bool any = s.target->any_prefix && (!s.draft || s.draft->any_prefix);
  if (any) return common;
  // A recurrent state returns only to its own length (the draft's KV rows reach at least as far).
  return common == s.tokens.size() ? common : 0;
}
}  // namespace

void PromptCache::put(std::unique_ptr<GeneratorSnapshot> s) {
  if (!s || !s->target) return;
  std::lock_guard<std::mutex> lk(mu_);
  for (auto it = lru_.begin(); it != lru_.end(); ++it)
    if ((*it)->tokens == s->tokens) {
      bytes_ -= (*it)->bytes();
      lru_.erase(it);
      break;
    }
  const size_t b = s->bytes();
  if (b > budget_) return;
  evict_to(budget_ - b);
  bytes_ += b;
  lru_.push_front(std::move(s));
  ++counts_.stores;
}

void PromptCache::evict_to(size_t budget) {
  while (bytes_ > budget && !lru_.empty()) {
    bytes_ -= lru_.back()->bytes();
    lru_.pop_back();
    ++counts_.evictions;
  }
}

const GeneratorSnapshot* PromptCache::best_for(const std::vector<int32_t>& prompt, size_t at_least, size_t* reusable) {
  std::lock_guard<std::mutex> lk(mu_);
  auto best = lru_.end();
  size_t best_n = at_least;
  for (auto it = lru_.begin(); it != lru_.end(); ++it) {
    const size_t n = reusable_tokens(**it, prompt);
    if (n > best_n) {
      best = it;
      best_n = n;
    }
  }
  if (best == lru_.end()) {
    ++counts_.misses;
    return nullptr;
  }
  lru_.splice(lru_.begin(), lru_, best);
  ++counts_.hits;
  counts_.hit_tokens += best_n;
  if (reusable) *reusable = best_n;
  return lru_.front().get();
}

PromptCacheStats PromptCache::stats() const {
  std::lock_guard<std::mutex> lk(mu_);
  PromptCacheStats s = counts_;
  s.entries = lru_.size();
  s.bytes = bytes_;
  s.budget = budget_;
  return s;
}

}  // namespace dflash::server
