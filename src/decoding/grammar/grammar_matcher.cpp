#include "decoding/grammar/grammar_matcher.h"

#include <algorithm>

#include "util/error.h"

namespace dflash {

namespace {

// Expands positions into stacks whose top is a terminal. `raw` collects the stacks, each as
// its length then its positions, in no particular order; canonicalize() sorts them.
struct Expander {
  const Grammar& g;
  std::vector<uint32_t>& prefix;  // the stack below the position being expanded
  std::vector<uint32_t>& raw;

  void expand(uint32_t pos) {
    const uint32_t sym = g.symbol(pos);
    switch (Grammar::kind(sym)) {
      case Grammar::kTerminal:
        raw.push_back(uint32_t(prefix.size() + 1));
        raw.insert(raw.end(), prefix.begin(), prefix.end());
        raw.push_back(pos);
        return;
      case Grammar::kRule: {
        const uint32_t ret = pos + 1;
        const bool tail = g.symbol(ret) == Grammar::kEnd;  // nothing to come back to
        if (!tail) prefix.push_back(ret);
        for (uint32_t alt : g.alternatives(Grammar::arg(sym))) expand(alt);
        if (!tail) prefix.pop_back();
        return;
      }
      default: {  // the end of an alternative: resume the caller, or the root is complete
        if (prefix.empty()) {
          raw.push_back(0);
          return;
        }
        const uint32_t ret = prefix.back();
        prefix.pop_back();
        expand(ret);
        prefix.push_back(ret);
        return;
      }
    }
  }
};

struct Span {
  uint32_t off, len;
};

// Sorts the stacks of `raw` (by length, then positions), drops duplicates, writes `out`.
void canonicalize(const std::vector<uint32_t>& raw, std::vector<Span>& spans, std::vector<uint32_t>& out) {
  spans.clear();
  for (size_t i = 0; i < raw.size(); i += raw[i] + 1) spans.push_back(Span{uint32_t(i + 1), raw[i]});
  auto less = [&](const Span& a, const Span& b) {
    if (a.len != b.len) return a.len < b.len;
    return std::lexicographical_compare(raw.begin() + a.off, raw.begin() + a.off + a.len,
                                        raw.begin() + b.off, raw.begin() + b.off + b.len);
  };
  auto same = [&](const Span& a, const Span& b) {
    return a.len == b.len && std::equal(raw.begin() + a.off, raw.begin() + a.off + a.len, raw.begin() + b.off);
  };
  std::sort(spans.begin(), spans.end(), less);
  spans.erase(std::unique(spans.begin(), spans.end(), same), spans.end());
  out.clear();
  for (const Span& s : spans) {
    out.push_back(s.len);
    out.insert(out.end(), raw.begin() + s.off, raw.begin() + s.off + s.len);
  }
}

// Scratch buffers reused across calls on one thread: stepping a state allocates nothing.
struct Scratch {
  std::vector<uint32_t> prefix, raw;
  std::vector<Span> spans;
};
Scratch& scratch() {
  thread_local Scratch s;
  return s;
}

}  // namespace

GrammarMatcher::GrammarMatcher(std::shared_ptr<const Grammar> grammar) : grammar_(std::move(grammar)) {
  if (!grammar_) throw Error("grammar matcher: no grammar");
  Scratch& s = scratch();
  s.prefix.clear();
  s.raw.clear();
  Expander ex{*grammar_, s.prefix, s.raw};
  for (uint32_t alt : grammar_->alternatives(grammar_->root())) ex.expand(alt);
  canonicalize(s.raw, s.spans, state_);
}

void GrammarMatcher::step(const Grammar& g, const uint32_t* in, size_t n, uint8_t b, std::vector<uint32_t>& out) {
  Scratch& s = scratch();
  s.raw.clear();
  Expander ex{g, s.prefix, s.raw};
  for (size_t i = 0; i < n; i += in[i] + 1) {
    const uint32_t len = in[i];
    if (len == 0) continue;  // a complete parse consumes nothing more
    const uint32_t top = in[i + len];
    if (!g.byte_class(Grammar::arg(g.symbol(top))).has(b)) continue;
    s.prefix.assign(in + i + 1, in + i + len);
    ex.expand(top + 1);
  }
  canonicalize(s.raw, s.spans, out);
}

bool GrammarMatcher::state_can_end(const uint32_t* s, size_t n) {
  // Stacks are sorted by length, so the empty one (the complete parse) comes first.
  return n > 0 && s[0] == 0;
}

size_t GrammarMatcher::hash_state(const uint32_t* s, size_t n) {
  uint64_t h = 0x9e3779b97f4a7c15ull ^ n;
  for (size_t i = 0; i < n; ++i) {
    h ^= s[i];
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 32;
  }
  return size_t(h);
}

ByteSet GrammarMatcher::next_bytes(const Grammar& g, const uint32_t* s, size_t n) {
  ByteSet out;
  for (size_t i = 0; i < n; i += s[i] + 1) {
    if (s[i] == 0) continue;
    const ByteSet& c = g.byte_class(Grammar::arg(g.symbol(s[i + s[i]])));
    for (int w = 0; w < 4; ++w) out.bits[w] |= c.bits[w];
  }
  return out;
}

bool GrammarMatcher::accept_byte(uint8_t b) {
  if (state_.empty()) return false;
  thread_local std::vector<uint32_t> next;
  step(*grammar_, state_.data(), state_.size(), b, next);
  state_.swap(next);
  return !state_.empty();
}

bool GrammarMatcher::accept_bytes(std::string_view bytes) {
  for (char c : bytes) {
    if (!accept_byte(uint8_t(c))) return false;
  }
  return true;
}

bool GrammarMatcher::can_end() const { return state_can_end(state_.data(), state_.size()); }

}  // namespace dflash
