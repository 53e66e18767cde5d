#include "decoding/reasoning_gate.h"

namespace dflash {

ReasoningGate::ReasoningGate(std::unique_ptr<TokenConstraint> inner, int vocab, std::optional<int32_t> open,
                             std::optional<int32_t> close, bool starts_in_think, const std::vector<int32_t>& stop_ids)
    : inner_(std::move(inner)), vocab_(vocab), open_(open), close_(close) {
  const bool known = open_ && close_ && *open_ >= 0 && *open_ < vocab && *close_ >= 0 && *close_ < vocab;
  if (!known) open_.reset(), close_.reset();
  phase_ = !known ? Phase::Answer : starts_in_think ? Phase::Thinking : Phase::Start;
  thinking_.assign(size_t(vocab + 63) / 64, ~uint64_t(0));
  if (vocab % 64 != 0) thinking_.back() = (uint64_t(1) << (vocab % 64)) - 1;
  for (int32_t t : stop_ids)
    if (t >= 0 && t < vocab && t != (close_ ? *close_ : -1)) thinking_[size_t(t) >> 6] &= ~(uint64_t(1) << (unsigned(t) & 63));
}

ReasoningGate::ReasoningGate(const ReasoningGate& other)
    : inner_(other.inner_->clone()), vocab_(other.vocab_), open_(other.open_), close_(other.close_),
      phase_(other.phase_), thinking_(other.thinking_) {}

const uint64_t* ReasoningGate::allowed() {
  switch (phase_) {
    case Phase::Thinking: return thinking_.data();
    case Phase::Answer: return inner_->allowed();
    case Phase::Start: break;
  }
  const uint64_t* in = inner_->allowed();
  start_.assign(in, in + thinking_.size());
  start_[size_t(*open_) >> 6] |= uint64_t(1) << (unsigned(*open_) & 63);
  return start_.data();
}

bool ReasoningGate::accept(int32_t token) {
  switch (phase_) {
    case Phase::Thinking:
      if (token == *close_) phase_ = Phase::Answer;
      return true;
    case Phase::Answer: return inner_->accept(token);
    case Phase::Start:
      if (token == *open_) {
        phase_ = Phase::Thinking;
        return true;
      }
      if (!inner_->accept(token)) return false;
      phase_ = Phase::Answer;
      return true;
  }
  return false;
}

}  // namespace dflash
