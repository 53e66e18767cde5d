#include "chat/jinja_strings.h"

#include <algorithm>

#include "chat/jinja_budget.h"
#include "chat/jinja_unicode.h"
#include "chat/jinja_value.h"

namespace dflash::jinja {

SliceRange adjust_slice(int64_t len, std::optional<int64_t> start, std::optional<int64_t> stop,
                        std::optional<int64_t> step_opt) {
  int64_t step = step_opt.value_or(1);
  if (step == 0) fail("slice step cannot be zero");
  auto clamp = [&](std::optional<int64_t> v, int64_t dflt) {
    if (!v) return dflt;
    int64_t x = *v;
    if (x < 0) {
      x += len;
      if (x < 0) x = step < 0 ? -1 : 0;
    } else if (x >= len) {
      x = step < 0 ? len - 1 : len;
    }
    return x;
  };
  int64_t st = clamp(start, step < 0 ? len - 1 : 0);
  int64_t sp = clamp(stop, step < 0 ? -1 : len);
  int64_t count = 0;
  if (step > 0 && sp > st) count = (sp - st - 1) / step + 1;
  if (step < 0 && st > sp) count = (st - sp - 1) / (-step) + 1;
  return {st, sp, step, count};
}

std::string str_slice(std::string_view s, const SliceRange& r) {
  if (r.step == 1 && is_ascii(s))
    return r.count > 0 ? std::string(s.substr(static_cast<size_t>(r.start), static_cast<size_t>(r.count))) : "";
  std::u32string u = utf8_decode(s), out;
  for (int64_t k = 0, i = r.start; k < r.count; ++k, i += r.step) out.push_back(u[static_cast<size_t>(i)]);
  return utf8_encode(out);
}

std::string str_at(std::string_view s, int64_t index) {
  if (is_ascii(s)) return std::string(1, s[static_cast<size_t>(index)]);
  std::u32string u = utf8_decode(s);
  std::string out;
  utf8_append(out, u[static_cast<size_t>(index)]);
  return out;
}

std::string py_strip(std::string_view s, const std::optional<std::string>& chars, bool left, bool right) {
  std::u32string u = utf8_decode(s);
  std::u32string set = chars ? utf8_decode(*chars) : std::u32string();
  auto strip = [&](char32_t c) {
    return chars ? set.find(c) != std::u32string::npos : py_isspace(c);
  };
  size_t b = 0, e = u.size();
  if (left)
    while (b < e && strip(u[b])) ++b;
  if (right)
    while (e > b && strip(u[e - 1])) --e;
  return utf8_encode(std::u32string_view(u).substr(b, e - b));
}

std::vector<std::string> py_split(std::string_view s, const std::optional<std::string>& sep,
                                  int64_t maxsplit) {
  std::vector<std::string> out;
  int64_t remaining = maxsplit < 0 ? INT64_MAX : maxsplit;
  if (sep) {
    if (sep->empty()) fail("empty separator");
    size_t pos = 0;
    while (remaining-- > 0) {
      size_t f = s.find(*sep, pos);
      if (f == std::string_view::npos) break;
      out.emplace_back(s.substr(pos, f - pos));
      pos = f + sep->size();
    }
    out.emplace_back(s.substr(pos));
    return out;
  }
  std::u32string u = utf8_decode(s);
  size_t i = 0, n = u.size();
  while (remaining-- > 0) {
    while (i < n && py_isspace(u[i])) ++i;
    if (i == n) break;
    size_t j = i++;
    while (i < n && !py_isspace(u[i])) ++i;
    out.push_back(utf8_encode(std::u32string_view(u).substr(j, i - j)));
  }
  if (i < n) {
    while (i < n && py_isspace(u[i])) ++i;
    if (i != n) out.push_back(utf8_encode(std::u32string_view(u).substr(i)));
  }
  return out;
}

std::vector<std::string> py_rsplit(std::string_view s, const std::optional<std::string>& sep,
                                   int64_t maxsplit) {
  std::vector<std::string> out;
  int64_t remaining = maxsplit < 0 ? INT64_MAX : maxsplit;
  if (sep) {
    if (sep->empty()) fail("empty separator");
    size_t end = s.size();
    while (remaining-- > 0) {
      if (end < sep->size()) break;
      size_t f = s.rfind(*sep, end - sep->size());
      if (f == std::string_view::npos) break;
      out.emplace_back(s.substr(f + sep->size(), end - f - sep->size()));
      end = f;
    }
    out.emplace_back(s.substr(0, end));
    std::reverse(out.begin(), out.end());
    return out;
  }
  std::u32string u = utf8_decode(s);
  int64_t i = static_cast<int64_t>(u.size()) - 1;
  auto sub = [&](int64_t b, int64_t e) {
    return utf8_encode(std::u32string_view(u).substr(static_cast<size_t>(b), static_cast<size_t>(e - b)));
  };
  while (remaining-- > 0) {
    while (i >= 0 && py_isspace(u[static_cast<size_t>(i)])) --i;
    if (i < 0) break;
    int64_t j = i--;
    while (i >= 0 && !py_isspace(u[static_cast<size_t>(i)])) --i;
    out.push_back(sub(i + 1, j + 1));
  }
  if (i >= 0) {
    while (i >= 0 && py_isspace(u[static_cast<size_t>(i)])) --i;
    if (i >= 0) out.push_back(sub(0, i + 1));
  }
  std::reverse(out.begin(), out.end());
  return out;
}

std::vector<std::string> py_splitlines(std::string_view s, bool keepends) {
  std::u32string u = utf8_decode(s);
  std::vector<std::string> out;
  size_t i = 0, n = u.size();
  while (i < n) {
    size_t j = i;
    while (j < n && !py_islinebreak(u[j])) ++j;
    size_t eol = j;
    if (j < n) {
      j += (u[j] == '\r' && j + 1 < n && u[j + 1] == '\n') ? 2 : 1;
      if (keepends) eol = j;
    }
    out.push_back(utf8_encode(std::u32string_view(u).substr(i, eol - i)));
    i = j;
  }
  return out;
}

std::string py_replace(std::string_view s, std::string_view old, std::string_view repl, int64_t count) {
  if (count < 0) count = INT64_MAX;
  std::string out;
  if (old.empty()) {
    std::u32string u = utf8_decode(s);
    for (size_t i = 0; i <= u.size(); ++i) {
      if (count > 0) {
        append_checked(out, repl);
        --count;
      }
      if (i < u.size()) utf8_append(out, u[i]);
    }
    return out;
  }
  size_t pos = 0;
  while (count > 0) {
    size_t f = s.find(old, pos);
    if (f == std::string_view::npos) break;
    out.append(s.substr(pos, f - pos));
    append_checked(out, repl);
    pos = f + old.size();
    --count;
  }
  out.append(s.substr(pos));
  return out;
}

namespace {

// Resolves str.find-style start/end to [b, e) in code points; false when b > len.
bool find_bounds(int64_t len, std::optional<int64_t> start, std::optional<int64_t> end, int64_t& b,
                 int64_t& e) {
  auto fix = [&](std::optional<int64_t> v, int64_t dflt) {
    if (!v) return dflt;
    int64_t x = *v;
    if (x < 0) x = std::max<int64_t>(0, x + len);
    return std::min(x, len);
  };
  b = start ? (*start < 0 ? std::max<int64_t>(0, *start + len) : *start) : 0;
  e = fix(end, len);
  return b <= len;
}

}  // namespace

int64_t py_find(std::string_view s, std::string_view sub, std::optional<int64_t> start,
                std::optional<int64_t> end, bool reverse) {
  std::u32string u = utf8_decode(s), v = utf8_decode(sub);
  int64_t len = static_cast<int64_t>(u.size()), b, e;
  if (!find_bounds(len, start, end, b, e)) return -1;
  int64_t m = static_cast<int64_t>(v.size());
  if (e - b < m) return -1;
  std::u32string_view hay(u.data() + b, static_cast<size_t>(e - b));
  size_t f = reverse ? hay.rfind(v) : hay.find(v);
  return f == std::u32string_view::npos ? -1 : b + static_cast<int64_t>(f);
}

int64_t py_count(std::string_view s, std::string_view sub, std::optional<int64_t> start,
                 std::optional<int64_t> end) {
  std::u32string u = utf8_decode(s), v = utf8_decode(sub);
  int64_t len = static_cast<int64_t>(u.size()), b, e;
  if (!find_bounds(len, start, end, b, e)) return 0;
  if (e < b) return 0;
  if (v.empty()) return e - b + 1;
  std::u32string_view hay(u.data() + b, static_cast<size_t>(e - b));
  int64_t n = 0;
  for (size_t f = hay.find(v); f != std::u32string_view::npos; f = hay.find(v, f + v.size())) ++n;
  return n;
}

std::string py_repeat(std::string_view s, int64_t n) {
  check_repeat(s.size(), n);
  std::string out;
  if (n > 0) out.reserve(s.size() * static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) out += s;
  return out;
}

std::string py_pad(std::string_view s, int64_t width, char32_t fill, char align) {
  int64_t len = static_cast<int64_t>(utf8_length(s));
  if (width <= len) return std::string(s);
  int64_t pad = width - len;
  int64_t left = align == '>' ? pad : align == '^' ? pad / 2 : 0;
  std::string f;
  utf8_append(f, fill);
  return py_repeat(f, left) + std::string(s) + py_repeat(f, pad - left);
}

std::string py_center(std::string_view s, int64_t width, char32_t fill) {
  int64_t len = static_cast<int64_t>(utf8_length(s));
  if (width <= len) return std::string(s);
  int64_t marg = width - len;
  int64_t left = marg / 2 + (marg & width & 1);
  std::string f;
  utf8_append(f, fill);
  return py_repeat(f, left) + std::string(s) + py_repeat(f, marg - left);
}

std::string html_escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out.push_back(c);
    }
  }
  return out;
}

}  // namespace dflash::jinja
