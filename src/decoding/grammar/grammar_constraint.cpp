#include "decoding/grammar/grammar_constraint.h"

#include <algorithm>

#include "util/error.h"

namespace dflash {

GrammarConstraint::GrammarConstraint(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenTable> table,
                                     std::shared_ptr<MaskCache> cache, std::vector<int32_t> stop_ids)
    : table_(std::move(table)), cache_(std::move(cache)), stop_ids_(std::move(stop_ids)), matcher_(grammar) {
  if (!table_ || !cache_) throw Error("grammar constraint: needs a token table and a mask cache");
  if (cache_->grammar() != grammar || cache_->table() != table_) {
    throw Error("grammar constraint: the mask cache belongs to another grammar or token table");
  }
  for (int32_t t : stop_ids_) {
    if (t < 0 || t >= table_->vocab_size()) {
      throw Error("grammar constraint: stop id " + std::to_string(t) + " is outside the vocabulary (" +
                  std::to_string(table_->vocab_size()) + " tokens)");
    }
  }
  if (stop_ids_.empty()) throw Error("grammar constraint: needs at least one stop id");
}

bool GrammarConstraint::is_stop(int32_t t) const {
  return std::find(stop_ids_.begin(), stop_ids_.end(), t) != stop_ids_.end();
}

void GrammarConstraint::set_stop_bits(bool on) {
  for (int32_t t : stop_ids_) {
    uint64_t& w = mask_[size_t(t) >> 6];
    const uint64_t bit = uint64_t(1) << (t & 63);
    w = on ? (w | bit) : (w & ~bit);
  }
}

const uint64_t* GrammarConstraint::allowed() {
  if (mask_valid_) return mask_.data();
  if (finished_) {
    mask_.assign(table_->mask_words(), 0);  // past the end: only stopping again
    set_stop_bits(true);
  } else {
    MaskCache::Mask m = cache_->get(matcher_.state());
    mask_ = *m;
    // Stop ids follow the grammar's completeness, never their own bytes.
    set_stop_bits(false);
    bool any = false;
    for (uint64_t w : mask_) any |= w != 0;
    // Never empty: where nothing can follow (the vocabulary cannot spell the next byte),
    // stopping is the way out.
    set_stop_bits(matcher_.can_end() || !any);
  }
  mask_valid_ = true;
  return mask_.data();
}

bool GrammarConstraint::accept(int32_t token) {
  if (token < 0 || token >= table_->vocab_size() || finished_) return false;
  if (is_stop(token)) {
    if (!matcher_.can_end() && !mask_allows(allowed(), token)) return false;
    finished_ = true;
    mask_valid_ = false;
    return true;
  }
  const std::string_view bytes = table_->bytes(token);
  if (bytes.empty()) return false;
  GrammarMatcher next = matcher_;
  if (!next.accept_bytes(bytes)) return false;
  matcher_ = std::move(next);
  mask_valid_ = false;
  return true;
}

bool GrammarConstraint::accept_bytes(std::string_view bytes) {
  if (finished_) return false;
  GrammarMatcher next = matcher_;
  if (!next.accept_bytes(bytes)) return false;
  matcher_ = std::move(next);
  mask_valid_ = false;
  return true;
}

std::unique_ptr<TokenConstraint> GrammarConstraint::clone() const {
  return std::make_unique<GrammarConstraint>(*this);
}

}  // namespace dflash
