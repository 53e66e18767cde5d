#pragma once
// Leaves reasoning free and constrains the answer: structured output and forced tool calls
// start after "</think>" (vLLM ignored the grammar when reasoning ended inside the draft
// window; here the gate moves token by token, so a verify row is masked as plain decoding
// masks it). Before the first token the model may open a think block or start the answer;
// inside the block every token but the end-of-sequence ones is allowed (an answer that ended
// in its reasoning would have no value to give); after its close the inner constraint rules.
#include <optional>

#include "decoding/token_constraint.h"

namespace dflash {

class ReasoningGate : public TokenConstraint {
 public:
  enum class Phase { Start, Thinking, Answer };
  // `open`/`close`: the think markers' ids (none: the answer starts at once);
  // `starts_in_think`: the prompt already opened the block (templates that pre-open it).
  ReasoningGate(std::unique_ptr<TokenConstraint> inner, int vocab, std::optional<int32_t> open,
                std::optional<int32_t> close, bool starts_in_think, const std::vector<int32_t>& stop_ids = {});
  ReasoningGate(const ReasoningGate& other);

  const uint64_t* allowed() override;
  bool accept(int32_t token) override;
  std::unique_ptr<TokenConstraint> clone() const override { return std::make_unique<ReasoningGate>(*this); }
  Phase phase() const { return phase_; }

 private:
  std::unique_ptr<TokenConstraint> inner_;
  int vocab_;
  std::optional<int32_t> open_, close_;
  Phase phase_;
  std::vector<uint64_t> thinking_, start_;  // all but the stop ids; the inner mask plus the open marker
};

}  // namespace dflash
