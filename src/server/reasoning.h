#pragma once
// Splits generated ids into reasoning (between <think> and </think>) and answer text, as a
// stream: each push returns the new text of each channel, UTF-8 complete.
#include <optional>
#include <string>

#include "tokenizer/tokenizer.h"

namespace dflash::server {

struct Delta {
  std::string reasoning, content;
  bool empty() const { return reasoning.empty() && content.empty(); }
  void append(const Delta& d) {
    reasoning += d.reasoning;
    content += d.content;
  }
};

// The ids of the thinking markers, when the tokenizer has both as single tokens.
struct ThinkTokens {
  std::optional<int32_t> open, close;
  bool known() const { return open && close; }
  static ThinkTokens from(const Tokenizer& tok);
};

class ReasoningSplitter {
 public:
  // split=false: everything is answer text (raw completions, models without think tokens).
  ReasoningSplitter(const Tokenizer& tok, ThinkTokens think, bool split, bool start_in_think);

  Delta push(int32_t id);
  Delta flush();
  bool in_think() const { return in_think_; }

 private:
  void route(const std::string& text, Delta& d);

  StreamDecoder dec_;
  ThinkTokens think_;
  bool split_;
  bool in_think_;
  // Reasoning is trimmed of the newlines the template puts around it; the answer of the
  // whitespace after </think>. Trailing whitespace of reasoning waits here until more
  // reasoning text shows it was inside, not at the end.
  bool reasoning_started_ = false, content_after_close_ = false;
  std::string reasoning_ws_;
};

// Whether a prompt leaves the output inside an open <think> (templates that pre-open it).
bool prompt_opens_think(const std::vector<int32_t>& prompt, const ThinkTokens& think);

}  // namespace dflash::server
