#include "server/reasoning.h"

#include <algorithm>

namespace dflash::server {

namespace {
bool is_ws(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }
}  // namespace

ThinkTokens ThinkTokens::from(const Tokenizer& tok) {
  ThinkTokens t;
  t.open = tok.token_to_id("<think>");
  t.close = tok.token_to_id("</think>");
  return t;
}

ReasoningSplitter::ReasoningSplitter(const Tokenizer& tok, ThinkTokens think, bool split, bool start_in_think)
    : dec_(tok, /*skip_special=*/true), think_(think), split_(split && think.known()),
      in_think_(split_ && start_in_think) {}

void ReasoningSplitter::route(const std::string& text, Delta& d) {
  if (text.empty()) return;
  if (!in_think_) {
    if (!content_after_close_) {
      d.content += text;
      return;
    }
    const size_t at = std::find_if_not(text.begin(), text.end(), is_ws) - text.begin();
    if (at == text.size()) return;
    content_after_close_ = false;
    d.content += text.substr(at);
    return;
  }
  std::string t = text;
  if (!reasoning_started_) {
    const size_t at = std::find_if_not(t.begin(), t.end(), is_ws) - t.begin();
    t.erase(0, at);
    if (t.empty()) return;
    reasoning_started_ = true;
  }
  const size_t end = size_t(std::find_if_not(t.rbegin(), t.rend(), is_ws) - t.rbegin());
  const std::string tail = t.substr(t.size() - end);
  t.erase(t.size() - end);
  if (!t.empty()) {
    d.reasoning += reasoning_ws_ + t;
    reasoning_ws_.clear();
  }
  reasoning_ws_ += tail;
}

Delta ReasoningSplitter::push(int32_t id) {
  Delta d;
  if (split_ && (id == *think_.open || id == *think_.close)) {
    route(dec_.flush(), d);
    const bool opening = id == *think_.open;
    if (opening && !in_think_) {
      in_think_ = true;
      reasoning_started_ = false;
    } else if (!opening && in_think_) {
      in_think_ = false;
      reasoning_ws_.clear();
      content_after_close_ = true;
    }
    return d;
  }
  route(dec_.push(id), d);
  return d;
}

Delta ReasoningSplitter::flush() {
  Delta d;
  route(dec_.flush(), d);
  return d;
}

bool prompt_opens_think(const std::vector<int32_t>& prompt, const ThinkTokens& think) {
  if (!think.known()) return false;
  for (auto it = prompt.rbegin(); it != prompt.rend(); ++it) {
    if (*it == *think.close) return false;
    if (*it == *think.open) return true;
  }
  return false;
}

}  // namespace dflash::server
