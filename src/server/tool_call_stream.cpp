// The streaming side of tool_calls.h: ToolCallStream.
#include <utility>

#include "server/tool_calls.h"

namespace dflash::server {

namespace {

const std::string kOpen = "<tool_call>";
const std::string kClose = "</tool_call>";

bool is_ws(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

size_t trailing_ws(const std::string& s) {
  size_t n = 0;
  while (n < s.size() && is_ws(s[s.size() - 1 - n])) ++n;
  return n;
}

void add_note(std::string& note, const std::string& why) {
  if (!note.empty()) note += "; ";
  note += why;
}

}  // namespace

ToolCallStream::ToolCallStream(ToolCallOptions opt) : opt_(std::move(opt)) { content_.incremental = opt_.incremental; }

void ToolCallStream::emit_text(Channel& ch, const std::string& text, std::string& out) {
  if (text.empty()) return;
  const size_t ws = trailing_ws(text);
  if (ws == text.size()) {
    ch.ws += text;
    return;
  }
  out += ch.ws;
  out.append(text, 0, text.size() - ws);
  ch.ws = text.substr(text.size() - ws);
}

// Incremental mode: the open block (its inside so far) commits once it names an allowed
// function (the call's first piece goes out), and then its arguments go out as they grow.
void ToolCallStream::advance(Channel& ch, const std::string& inside, std::vector<ToolCallDelta>& calls) {
  const CallProgress p = call_progress(inside, opt_);
  if (!ch.committed) {
    if (!commits(p, opt_, count_)) return;
    ch.committed = true;
    ch.index = count_++;
    ch.sent.clear();
    ToolCallDelta head;
    head.index = ch.index;
    head.id = opt_.id_base + "_" + std::to_string(ch.index);
    head.name = p.name;
    head.first = true;
    calls.push_back(head);
  }
  send_arguments(ch, p.arguments, calls);
}

void ToolCallStream::send_arguments(Channel& ch, const std::string& args, std::vector<ToolCallDelta>& calls) {
  // The progress only grows (a guard all the same: what went out is never taken back).
  if (args.size() <= ch.sent.size() || args.compare(0, ch.sent.size(), ch.sent) != 0) return;
  ToolCallDelta d;
  d.index = ch.index;
  d.arguments = args.substr(ch.sent.size());
  ch.sent = args;
  calls.push_back(std::move(d));
}

void ToolCallStream::take_block(const std::string& raw, const std::string& inside, Channel& ch, std::string& out,
                                std::vector<ToolCallDelta>& calls) {
  ToolCall c;
  std::string why;
  if (ch.incremental) {
    advance(ch, inside, calls);
    if (ch.committed) {
      ch.committed = false;
      send_arguments(ch, committed_arguments(inside, call_progress(inside, opt_), opt_, why), calls);
      if (!why.empty()) add_note(note_, why);
      return;
    }
  }
  if (!opt_.parallel && count_ > 0) {
    emit_text(ch, raw, out);
    add_note(note_, "a further call left as text (parallel_tool_calls is false)");
    return;
  }
  if (!parse_tool_block(inside, opt_, c, why)) {
    emit_text(ch, raw, out);
    add_note(note_, why);
    return;
  }
  const int index = count_++;
  ToolCallDelta head;
  head.index = index;
  head.id = opt_.id_base + "_" + std::to_string(index);
  head.name = c.name;
  head.first = true;
  calls.push_back(head);
  ToolCallDelta args;
  args.index = index;
  args.arguments = c.arguments;
  calls.push_back(args);
}

void ToolCallStream::feed(Channel& ch, const std::string& text, std::string& out, std::vector<ToolCallDelta>& calls,
                          bool final) {
  ch.pending += text;
  for (;;) {
    if (ch.in_block) {
      const size_t close = ch.pending.find(kClose, kOpen.size());
      if (close == std::string::npos) {
        if (ch.incremental) advance(ch, without_partial_close(ch.pending.substr(kOpen.size())), calls);
        if (!final) return;
        ch.in_block = false;
        if (ch.committed) {  // cut: the call stays as far as it went
          const CallProgress p = call_progress(without_partial_close(ch.pending.substr(kOpen.size())), opt_);
          add_note(note_, "a tool call to '" + p.name + "' cut before </tool_call>: its arguments are incomplete");
          ch.committed = false;
          ch.pending.clear();
          cut_ = true;
          return;
        }
        emit_text(ch, std::exchange(ch.pending, std::string()), out);
        add_note(note_, "an unclosed <tool_call> block");
        return;
      }
      const std::string raw = ch.pending.substr(0, close + kClose.size());
      const std::string inside = ch.pending.substr(kOpen.size(), close - kOpen.size());
      ch.pending.erase(0, raw.size());
      ch.in_block = false;
      take_block(raw, inside, ch, out, calls);
      continue;
    }
    const size_t open = ch.pending.find(kOpen);
    if (open != std::string::npos) {
      emit_text(ch, ch.pending.substr(0, open), out);
      ch.pending.erase(0, open);
      ch.in_block = true;
      continue;
    }
    // Hold back the longest tail that could still become "<tool_call>".
    size_t keep = 0;
    if (!final)
      for (size_t len = std::min(kOpen.size() - 1, ch.pending.size()); len > 0; --len)
        if (ch.pending.compare(ch.pending.size() - len, len, kOpen, 0, len) == 0) {
          keep = len;
          break;
        }
    emit_text(ch, ch.pending.substr(0, ch.pending.size() - keep), out);
    ch.pending.erase(0, ch.pending.size() - keep);
    return;
  }
}

ToolStreamOut ToolCallStream::push(const std::string& reasoning, const std::string& content) {
  ToolStreamOut o;
  if (opt_.format == ToolFormat::None) {
    o.reasoning = reasoning;
    o.content = content;
    return o;
  }
  if (!reasoning.empty()) feed(reasoning_, reasoning, o.reasoning, o.calls, false);
  if (!content.empty()) {
    // The answer has begun: reasoning is over, so what it held back is judged now (in the
    // finished parse too, reasoning's blocks come before the answer's).
    if (!reasoning_.pending.empty()) feed(reasoning_, "", o.reasoning, o.calls, true);
    feed(content_, content, o.content, o.calls, false);
  }
  return o;
}

ToolStreamOut ToolCallStream::flush() {
  ToolStreamOut o;
  if (opt_.format == ToolFormat::None) return o;
  feed(reasoning_, "", o.reasoning, o.calls, true);
  feed(content_, "", o.content, o.calls, true);
  // Trailing whitespace stays only where no call was found (as the finished parse trims it).
  if (count_ == 0) {
    o.reasoning += reasoning_.ws;
    o.content += content_.ws;
  }
  reasoning_.ws.clear();
  content_.ws.clear();
  return o;
}

}  // namespace dflash::server
