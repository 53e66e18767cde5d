#pragma once
// A grammar that starts at a trigger text: tool calls with tool_choice "auto". The answer is
// free until it writes the trigger ("<tool_call>"); from there the block is decoded under the
// call grammar (an offered function's name, arguments valid by its schema, the closing tag),
// and once the grammar is complete the answer is free again, so a model may write text, a
// call, more text or more calls. llama.cpp calls this a lazy grammar. Where it pays: a call
// in auto mode can no longer break after its name, so the server streams its arguments as
// they are written instead of holding the block back until it validates.
//
// In the free stretches allowed() is null (any token), so those positions are sampled exactly
// as without a constraint; reasoning (<think> ... </think>) stays free throughout, calls
// written there included (the parser judges those whole).
//
// The trigger is matched on bytes, not on one token id: a vocabulary without a "<tool_call>"
// token spells it in pieces, and a token may run past it ("<tool_call>\n"); the bytes past the
// trigger go to the grammar, and when it cannot take them the block stays free text (the
// parser then judges it as in auto mode without a grammar).
#include <memory>
#include <optional>
#include <string>

#include "decoding/grammar/grammar_constraint.h"
#include "decoding/token_constraint.h"

namespace dflash {

class TriggeredConstraint : public TokenConstraint {
 public:
  enum class Phase { Start, Thinking, Free, Inside };
  // `body`: the grammar of what follows the trigger, at its start; each trigger walks a copy.
  // `open`/`close`: the think markers (none: no reasoning); `starts_in_think`: the prompt
  // opened the block.
  TriggeredConstraint(std::unique_ptr<GrammarConstraint> body, std::shared_ptr<const TokenTable> table,
                      std::string trigger, std::optional<int32_t> open, std::optional<int32_t> close,
                      bool starts_in_think);
  TriggeredConstraint(const TriggeredConstraint& other);

  const uint64_t* allowed() override;
  bool accept(int32_t token) override;
  std::unique_ptr<TokenConstraint> clone() const override { return std::make_unique<TriggeredConstraint>(*this); }

  Phase phase() const { return phase_; }
  int triggers() const { return triggers_; }  // blocks decoded under the grammar so far

 private:
  void free_text(std::string_view bytes);

  std::unique_ptr<GrammarConstraint> body_, inside_;
  std::shared_ptr<const TokenTable> table_;
  std::string trigger_;
  std::optional<int32_t> open_, close_;
  Phase phase_;
  std::string tail_;  // the free answer's last bytes, shorter than the trigger
  int triggers_ = 0;
};

}  // namespace dflash
