#include "decoding/grammar/json_string_grammar.h"

#include <bitset>
#include <vector>

#include "util/error.h"

namespace dflash {

using Expr = GrammarBuilder::Expr;

namespace {

Expr utf8_multibyte(GrammarBuilder& b, bool no_line_separators) {
  const Expr cont = b.byte_range(0x80, 0xBF);
  std::vector<Expr> three = {
      b.seq({b.literal("\xE0"), b.byte_range(0xA0, 0xBF), cont}),
      b.seq({b.literal("\xED"), b.byte_range(0x80, 0x9F), cont}),  // not the surrogates
      b.seq({b.byte_range(0xEE, 0xEF), cont, cont}),
  };
  if (no_line_separators) {
    // U+2028 and U+2029 are E2 80 A8 / E2 80 A9: JavaScript's "." does not match them.
    three.push_back(b.seq({b.byte_class(ByteSet().add(0xE1).add_range(0xE3, 0xEC)), cont, cont}));
    three.push_back(b.seq({b.literal("\xE2"), b.alt({
        b.seq({b.literal("\x80"), b.byte_class(ByteSet().add_range(0x80, 0xA7).add_range(0xAA, 0xBF))}),
        b.seq({b.byte_range(0x81, 0xBF), cont})})}));
  } else {
    three.push_back(b.seq({b.byte_range(0xE1, 0xEC), cont, cont}));
  }
  return b.alt({
      b.seq({b.byte_range(0xC2, 0xDF), cont}),
      b.alt(three),
      b.seq({b.literal("\xF0"), b.byte_range(0x90, 0xBF), cont, cont}),
      b.seq({b.byte_range(0xF1, 0xF3), cont, cont, cont}),
      b.seq({b.literal("\xF4"), b.byte_range(0x80, 0x8F), cont, cont}),
  });
}

std::string utf8_encode(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += char(cp);
  } else if (cp < 0x800) {
    s += char(0xC0 | (cp >> 6));
    s += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    s += char(0xE0 | (cp >> 12));
    s += char(0x80 | ((cp >> 6) & 0x3F));
    s += char(0x80 | (cp & 0x3F));
  } else {
    s += char(0xF0 | (cp >> 18));
    s += char(0x80 | ((cp >> 12) & 0x3F));
    s += char(0x80 | ((cp >> 6) & 0x3F));
    s += char(0x80 | (cp & 0x3F));
  }
  return s;
}

// A set of code points as the pattern compiler sees it: exact for ASCII; for the rest either
// listed code points or "all of them".
struct CharSet {
  std::bitset<128> ascii;
  std::vector<uint32_t> non_ascii;
  bool any_non_ascii = false;
  bool no_line_separators = false;  // with any_non_ascii: except U+2028/U+2029 (".")
  bool has_unicode_space_class = false;  // contains \s, whose non-ASCII members are not listed

  void add(const CharSet& o) {
    ascii |= o.ascii;
    non_ascii.insert(non_ascii.end(), o.non_ascii.begin(), o.non_ascii.end());
    any_non_ascii |= o.any_non_ascii;
    has_unicode_space_class |= o.has_unicode_space_class;
  }
  void add_cp(uint32_t cp) {
    if (cp < 128) ascii.set(cp);
    else non_ascii.push_back(cp);
  }
  // The complement. Its non-ASCII part is "everything" only when this set had no non-ASCII
  // members at all; otherwise it is left out (narrower, still valid).
  CharSet negated() const {
    CharSet r;
    r.ascii = ~ascii;
    r.any_non_ascii = !any_non_ascii && non_ascii.empty() && !has_unicode_space_class;
    return r;
  }
};

CharSet ascii_set(const char* ranges) {  // "az09" style pairs
  CharSet s;
  for (const char* p = ranges; p[0] && p[1]; p += 2) {
    for (int c = p[0]; c <= p[1]; ++c) s.ascii.set(size_t(c));
  }
  return s;
}

class PatternCompiler {
 public:
  PatternCompiler(GrammarBuilder& b, const JsonStringPieces& pieces, std::string_view pattern)
      : b_(b), pieces_(pieces), src_(pattern) {
    decode(pattern);
  }

  Expr compile() {
    std::vector<Expr> branches;
    const Expr anything = b_.repeat(pieces_.character, 0, -1);
    for (;;) {
      // JSON Schema patterns are unanchored: a branch without ^ / $ may have anything around.
      const bool start = eat('^');
      Expr body = concat(0);
      const bool end = eat('$');
      if (!at_end() && peek() != '|') fail("'^' and '$' are only supported at the ends of the pattern");
      branches.push_back(b_.seq({start ? b_.empty() : anything, body, end ? b_.empty() : anything}));
      if (!eat('|')) break;
    }
    if (!at_end()) fail("unbalanced ')'");
    return b_.alt(branches);
  }

 private:
  [[noreturn]] void fail(const std::string& why) const {
    throw Error("json schema: pattern \"" + std::string(src_) + "\": " + why);
  }
  bool at_end() const { return pos_ >= cps_.size(); }
  uint32_t peek(size_t ahead = 0) const { return pos_ + ahead < cps_.size() ? cps_[pos_ + ahead] : 0xFFFFFFFF; }
  uint32_t next() {
    if (at_end()) fail("ends in the middle of a construct");
    return cps_[pos_++];
  }
  bool eat(uint32_t c) {
    if (peek() != c) return false;
    ++pos_;
    return true;
  }

  void decode(std::string_view s) {
    for (size_t i = 0; i < s.size();) {
      const uint8_t c = uint8_t(s[i]);
      const int len = c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 0;
      if (len == 0 || i + len > s.size()) fail("is not valid UTF-8");
      uint32_t cp = len == 1 ? c : (c & (0x7F >> len));
      for (int k = 1; k < len; ++k) cp = (cp << 6) | (uint8_t(s[i + k]) & 0x3F);
      cps_.push_back(cp);
      i += size_t(len);
    }
  }

  // The JSON-encoded forms of the characters in a set.
  Expr encode(const CharSet& set) {
    std::vector<Expr> options;
    ByteSet plain;
    for (uint32_t c = 0; c < 128; ++c) {
      if (!set.ascii.test(c)) continue;
      if (c >= 0x20 && c != '"' && c != '\\') {
        plain.add(uint8_t(c));
      } else if (c == '"' || c == '\\') {
        options.push_back(b_.literal(std::string("\\") + char(c)));
      } else {
        static const char* hex = "0123456789abcdef";
        const char* named = c == '\n' ? "\\n" : c == '\r' ? "\\r" : c == '\t' ? "\\t" : c == '\b' ? "\\b"
                          : c == '\f' ? "\\f" : nullptr;
        options.push_back(b_.literal(named ? std::string(named)
                                           : std::string("\\u00") + hex[c >> 4] + hex[c & 15]));
      }
    }
    if (!plain.empty()) options.push_back(b_.byte_class(plain));
    if (set.any_non_ascii) {
      options.push_back(set.no_line_separators ? pieces_.utf8_non_ascii_no_line_separators : pieces_.utf8_non_ascii);
    } else {
      for (uint32_t cp : set.non_ascii) options.push_back(b_.literal(utf8_encode(cp)));
    }
    return b_.alt(options);  // an empty set: an alternation of nothing, which never matches
  }

  Expr concat(int depth) {
    std::vector<Expr> items;
    while (!at_end() && peek() != '|' && peek() != ')') {
      if (depth == 0 && peek() == '$' && (pos_ + 1 == cps_.size() || peek(1) == '|')) break;
      Expr atom_expr = atom(depth);
      items.push_back(quantified(atom_expr));
    }
    return items.empty() ? b_.empty() : b_.seq(items);
  }

  Expr quantified(Expr x) {
    int min = 0, max = 0;
    if (eat('*')) {
      min = 0, max = -1;
    } else if (eat('+')) {
      min = 1, max = -1;
    } else if (eat('?')) {
      min = 0, max = 1;
    } else if (peek() == '{' && braces(min, max)) {
    } else {
      return x;
    }
    eat('?');  // lazy: the same set of strings
    if (peek() == '*' || peek() == '+' || peek() == '?' || peek() == '{') {
      if (peek() != '{' || brace_is_quantifier()) fail("has a quantifier on a quantifier");
    }
    return b_.repeat(x, min, max);
  }

  bool read_int(size_t& p, int& out) const {
    size_t start = p;
    long v = 0;
    while (p < cps_.size() && cps_[p] >= '0' && cps_[p] <= '9') {
      v = v * 10 + long(cps_[p] - '0');
      if (v > 100000) fail("has a repetition count over 100000");
      ++p;
    }
    out = int(v);
    return p > start;
  }
  // {m}, {m,}, {m,n}; anything else is a literal "{" (as ECMA-262 allows outside Unicode mode).
  bool brace_is_quantifier() const {
    int m = 0, n = 0;
    size_t p = pos_ + 1;
    if (!read_int(p, m)) return false;
    if (p < cps_.size() && cps_[p] == ',') {
      ++p;
      read_int(p, n);
    }
    return p < cps_.size() && cps_[p] == '}';
  }
  bool braces(int& min, int& max) {
    if (!brace_is_quantifier()) return false;
    size_t p = pos_ + 1;
    read_int(p, min);
    max = min;
    if (cps_[p] == ',') {
      ++p;
      if (!read_int(p, max)) max = -1;
    }
    if (max != -1 && max < min) fail("has a repetition {m,n} with n < m");
    pos_ = p + 1;
    return true;
  }

  Expr atom(int depth) {
    const uint32_t c = next();
    switch (c) {
      case '(': {
        if (eat('?')) {
          if (eat(':')) {
          } else if (peek() == '<' && peek(1) != '=' && peek(1) != '!') {
            while (!at_end() && next() != '>') {
            }
          } else {
            fail("lookahead and lookbehind ((?=, (?!, (?<=, (?<!) are not supported");
          }
        }
        Expr inner = alternation(depth + 1);
        if (!eat(')')) fail("has an unclosed '('");
        return inner;
      }
      case '[': return encode(char_class());
      case '.': {
        CharSet s;
        s.ascii.set();
        s.ascii.reset('\n');
        s.ascii.reset('\r');
        s.any_non_ascii = true;
        s.no_line_separators = true;
        return encode(s);
      }
      case '\\': return encode(escape(false));
      case '^':
      case '$': fail("'^' and '$' are only supported at the ends of the pattern");
      case '*':
      case '+':
      case '?': fail("has a quantifier with nothing to repeat");
      default: {
        CharSet s;
        s.add_cp(c);
        return encode(s);
      }
    }
  }

  Expr alternation(int depth) {
    std::vector<Expr> options = {concat(depth)};
    while (eat('|')) options.push_back(concat(depth));
    return b_.alt(options);
  }

  uint32_t hex_digits(int count) {
    uint32_t v = 0;
    for (int i = 0; i < count; ++i) {
      const uint32_t h = next();
      int d = h >= '0' && h <= '9' ? int(h - '0') : h >= 'a' && h <= 'f' ? int(h - 'a' + 10)
            : h >= 'A' && h <= 'F' ? int(h - 'A' + 10) : -1;
      if (d < 0) fail("has a malformed \\x or \\u escape");
      v = v * 16 + uint32_t(d);
    }
    return v;
  }

  // After a backslash, inside a class or not.
  CharSet escape(bool in_class) {
    const uint32_t c = next();
    CharSet s;
    switch (c) {
      case 'd': return ascii_set("09");
      case 'D': { CharSet d = ascii_set("09").negated(); return d; }
      case 'w': return ascii_set("azAZ09__");
      case 'W': return ascii_set("azAZ09__").negated();
      case 's': {
        CharSet w = ascii_set("  \t\r");
        w.has_unicode_space_class = true;  // its non-ASCII spaces are not produced
        return w;
      }
      case 'S': {
        CharSet w = ascii_set("  \t\r");
        w.ascii = ~w.ascii;  // ASCII only: U+00A0 and friends would be \s
        return w;
      }
      case 'n': s.add_cp('\n'); return s;
      case 'r': s.add_cp('\r'); return s;
      case 't': s.add_cp('\t'); return s;
      case 'f': s.add_cp('\f'); return s;
      case 'v': s.add_cp('\v'); return s;
      case '0': s.add_cp(0); return s;
      case 'x': s.add_cp(hex_digits(2)); return s;
      case 'u': {
        uint32_t cp = 0;
        if (eat('{')) {
          while (peek() != '}') cp = cp * 16 + hex_digits(1);
          next();
        } else {
          cp = hex_digits(4);
        }
        if (cp >= 0xD800 && cp <= 0xDFFF) fail("has a \\u escape of a surrogate");
        s.add_cp(cp);
        return s;
      }
      case 'b':
        if (in_class) { s.add_cp('\b'); return s; }
        fail("\\b (word boundary) is not supported");
      case 'B': fail("\\B (word boundary) is not supported");
      case 'p':
      case 'P': fail("Unicode property escapes (\\p, \\P) are not supported");
      case 'c': fail("control escapes (\\c) are not supported");
      case 'k': fail("named backreferences (\\k) are not supported");
      default:
        if (c >= '1' && c <= '9') fail("backreferences are not supported");
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
          fail(std::string("has the unknown escape \\") + char(c));
        }
        s.add_cp(c);  // escaped punctuation stands for itself
        return s;
    }
  }

  CharSet char_class() {
    const bool negate = eat('^');
    CharSet set;
    while (peek() != ']') {  // ECMA-262: "[]" is empty and "[^]" is anything
      if (at_end()) fail("has an unclosed '['");
      uint32_t c = next();
      CharSet item;
      bool single = true;
      if (c == '\\') {
        item = escape(true);
        single = item.ascii.count() + item.non_ascii.size() == 1 && !item.any_non_ascii &&
                 !item.has_unicode_space_class;
        if (single) c = item.non_ascii.empty() ? uint32_t(item.ascii._Find_first()) : item.non_ascii[0];
      } else {
        item.add_cp(c);
      }
      if (peek() == '-' && peek(1) != ']' && peek(1) != 0xFFFFFFFF) {
        next();
        uint32_t hi = next();
        if (hi == '\\') {
          CharSet h = escape(true);
          if (h.ascii.count() + h.non_ascii.size() != 1 || h.any_non_ascii) fail("has a range to a class escape");
          hi = h.non_ascii.empty() ? uint32_t(h.ascii._Find_first()) : h.non_ascii[0];
        }
        if (!single) fail("has a range from a class escape");
        if (hi < c) fail("has a range out of order");
        if (hi >= 128 && hi != c) fail("has a range of non-ASCII characters, which is not supported");
        for (uint32_t x = c; x <= hi; ++x) item.add_cp(x);
      }
      set.add(item);
    }
    next();  // ']'
    return negate ? set.negated() : set;
  }

  GrammarBuilder& b_;
  const JsonStringPieces& pieces_;
  std::string_view src_;
  std::vector<uint32_t> cps_;
  size_t pos_ = 0;
};

}  // namespace

JsonStringPieces::JsonStringPieces(GrammarBuilder& b) {
  utf8_non_ascii = utf8_multibyte(b, false);
  utf8_non_ascii_no_line_separators = utf8_multibyte(b, true);
  const Expr hex = b.byte_class(ByteSet().add_range('0', '9').add_range('a', 'f').add_range('A', 'F'));
  // \uXXXX except D800-DFFF: each escape is exactly one code point.
  const Expr u_escape = b.alt({
      b.seq({b.byte_class(ByteSet().add_range('0', '9').add_range('a', 'c').add_range('A', 'C')
                               .add_range('e', 'f').add_range('E', 'F')), hex, hex, hex}),
      b.seq({b.byte_class(ByteSet().add_chars("dD")), b.byte_range('0', '7'), hex, hex}),
  });
  const Expr escape = b.seq({b.literal("\\"), b.alt({b.byte_class(ByteSet().add_chars("\"\\/bfnrt")),
                                                      b.seq({b.literal("u"), u_escape})})});
  ByteSet plain;
  plain.add_range(0x20, 0x7F);
  plain.bits[uint8_t('"') >> 6] &= ~(uint64_t(1) << ('"' & 63));
  plain.bits[uint8_t('\\') >> 6] &= ~(uint64_t(1) << ('\\' & 63));
  character = b.alt({b.byte_class(plain), escape, utf8_non_ascii});
}

Expr json_string_pattern(GrammarBuilder& b, const JsonStringPieces& pieces, std::string_view pattern) {
  return PatternCompiler(b, pieces, pattern).compile();
}

}  // namespace dflash
