#include "decoding/triggered_constraint.h"

#include <utility>

#include "util/error.h"

namespace dflash {

TriggeredConstraint::TriggeredConstraint(std::unique_ptr<GrammarConstraint> body, std::shared_ptr<const TokenTable> table,
                                         std::string trigger, std::optional<int32_t> open,
                                         std::optional<int32_t> close, bool starts_in_think)
    : body_(std::move(body)), table_(std::move(table)), trigger_(std::move(trigger)), open_(open), close_(close) {
  if (!body_ || !table_ || trigger_.empty()) throw Error("triggered constraint: needs a grammar, a token table and a trigger");
  const int32_t v = table_->vocab_size();
  const bool known = open_ && close_ && *open_ >= 0 && *open_ < v && *close_ >= 0 && *close_ < v;
  if (!known) open_.reset(), close_.reset();
  phase_ = !known ? Phase::Free : starts_in_think ? Phase::Thinking : Phase::Start;
}

TriggeredConstraint::TriggeredConstraint(const TriggeredConstraint& o)
    : body_(std::make_unique<GrammarConstraint>(*o.body_)),
      inside_(o.inside_ ? std::make_unique<GrammarConstraint>(*o.inside_) : nullptr),
      table_(o.table_),
      trigger_(o.trigger_),
      open_(o.open_),
      close_(o.close_),
      phase_(o.phase_),
      tail_(o.tail_),
      triggers_(o.triggers_) {}

const uint64_t* TriggeredConstraint::allowed() { return phase_ == Phase::Inside ? inside_->allowed() : nullptr; }

// Free answer text: looks for the trigger across token boundaries; where it ends, the rest of
// the bytes start the block's grammar (or, when the grammar cannot take them, stay free text
// in which the trigger is looked for again).
void TriggeredConstraint::free_text(std::string_view bytes) {
  std::string s = tail_;
  s.append(bytes);
  for (;;) {
    const size_t at = s.find(trigger_);
    if (at == std::string::npos) break;
    std::string rest = s.substr(at + trigger_.size());
    auto in = std::make_unique<GrammarConstraint>(*body_);
    if (in->accept_bytes(rest) && !in->can_end()) {
      inside_ = std::move(in);
      phase_ = Phase::Inside;
      ++triggers_;
      tail_.clear();
      return;
    }
    s = std::move(rest);
  }
  const size_t keep = std::min(s.size(), trigger_.size() - 1);
  tail_ = s.substr(s.size() - keep);
}

bool TriggeredConstraint::accept(int32_t token) {
  if (token < 0 || token >= table_->vocab_size()) return false;
  switch (phase_) {
    case Phase::Start:
      if (token == *open_) {
        phase_ = Phase::Thinking;
        return true;
      }
      phase_ = Phase::Free;
      free_text(table_->bytes(token));
      return true;
    case Phase::Thinking:
      if (token == *close_) phase_ = Phase::Free;
      return true;
    case Phase::Free: {
      const std::string_view bytes = table_->bytes(token);
      if (bytes.empty()) tail_.clear();  // a special token: no text runs across it
      else free_text(bytes);
      return true;
    }
    case Phase::Inside:
      if (!inside_->accept(token)) return false;
      if (inside_->can_end() || inside_->finished()) {
        inside_.reset();
        phase_ = Phase::Free;
        tail_.clear();
      }
      return true;
  }
  return false;
}

}  // namespace dflash
