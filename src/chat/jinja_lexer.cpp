#include "chat/jinja_lexer.h"

#include <cstdio>
#include <cstdlib>

#include "chat/jinja_unicode.h"
#include "util/error.h"

namespace dflash::jinja {

void syntax_error(int line, const std::string& msg) {
  throw Error("template syntax error on line " + std::to_string(line) + ": " + msg);
}

namespace {

// Length in bytes of the Python-whitespace character at s[i], or 0.
size_t space_at(std::string_view s, size_t i) {
  unsigned char c = static_cast<unsigned char>(s[i]);
  if (c < 0x80) return py_isspace(c) ? 1 : 0;
  size_t len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
  if (i + len > s.size()) return 0;
  std::u32string cp = utf8_decode(s.substr(i, len));
  return cp.size() == 1 && py_isspace(cp[0]) ? len : 0;
}

size_t skip_spaces(std::string_view s, size_t i) {
  while (i < s.size()) {
    size_t n = space_at(s, i);
    if (!n) break;
    i += n;
  }
  return i;
}

bool all_spaces(std::string_view s) { return !s.empty() && skip_spaces(s, 0) == s.size(); }

std::string rstrip_spaces(std::string_view s) {
  std::u32string u = utf8_decode(s);
  while (!u.empty() && py_isspace(u.back())) u.pop_back();
  return utf8_encode(u);
}

int count_newlines(std::string_view s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// A literal's body as Python's "unicode-escape" codec reads it after jinja2 has turned every
// non-ASCII character into a backslash escape first.
std::string decode_string(std::string_view raw, int line) {
  std::string out;
  for (size_t i = 0; i < raw.size(); ++i) {
    char c = raw[i];
    if (c != '\\') {
      out.push_back(c);
      continue;
    }
    if (i + 1 >= raw.size()) syntax_error(line, "\\ at end of string");
    char n = raw[++i];
    auto hex_escape = [&](int digits, const char* what) {
      uint32_t v = 0;
      for (int k = 0; k < digits; ++k) {
        int h = i + 1 < raw.size() ? hex_value(raw[i + 1]) : -1;
        if (h < 0) syntax_error(line, std::string("truncated ") + what + " escape");
        v = v * 16 + static_cast<uint32_t>(h);
        ++i;
      }
      if (v > 0x10FFFF) syntax_error(line, "illegal Unicode character");
      utf8_append(out, v);
    };
    switch (n) {
      case '\n': break;
      case '\\': out.push_back('\\'); break;
      case '\'': out.push_back('\''); break;
      case '"': out.push_back('"'); break;
      case 'a': out.push_back('\a'); break;
      case 'b': out.push_back('\b'); break;
      case 'f': out.push_back('\f'); break;
      case 'n': out.push_back('\n'); break;
      case 'r': out.push_back('\r'); break;
      case 't': out.push_back('\t'); break;
      case 'v': out.push_back('\v'); break;
      case 'x': hex_escape(2, "\\xXX"); break;
      case 'u': hex_escape(4, "\\uXXXX"); break;
      case 'U': hex_escape(8, "\\UXXXXXXXX"); break;
      case 'N': syntax_error(line, "\\N{...} escapes are not supported");
      default:
        if (n >= '0' && n <= '7') {
          uint32_t v = static_cast<uint32_t>(n - '0');
          for (int k = 0; k < 2 && i + 1 < raw.size() && raw[i + 1] >= '0' && raw[i + 1] <= '7'; ++k)
            v = v * 8 + static_cast<uint32_t>(raw[++i] - '0');
          utf8_append(out, v);
        } else if (static_cast<unsigned char>(n) >= 0x80) {
          // The backslash escapes the first character of the replacement text instead.
          size_t len = static_cast<unsigned char>(n) >= 0xF0 ? 4 : static_cast<unsigned char>(n) >= 0xE0 ? 3 : 2;
          std::u32string cp = utf8_decode(raw.substr(i, len));
          i += len - 1;
          char buf[16];
          unsigned v = cp.empty() ? 0xFFFD : static_cast<unsigned>(cp[0]);
          if (v < 0x100) std::snprintf(buf, sizeof buf, "\\x%02x", v);
          else if (v < 0x10000) std::snprintf(buf, sizeof buf, "\\u%04x", v);
          else std::snprintf(buf, sizeof buf, "\\U%08x", v);
          out += buf;
        } else {
          out.push_back('\\');
          out.push_back(n);
        }
    }
  }
  return out;
}

class Lexer {
 public:
  Lexer(std::string src, const LexOptions& opt) : s_(std::move(src)), opt_(opt) {}

  std::vector<Token> run() {
    while (pos_ < s_.size()) {
      size_t p = find_opener(pos_);
      if (p == std::string::npos) {
        push(Tok::Data, s_.substr(pos_), line_);
        break;
      }
      char kind = s_[p + 1];  // '{', '%' or '#'
      char sign = p + 2 < s_.size() && (s_[p + 2] == '-' || s_[p + 2] == '+') ? s_[p + 2] : 0;
      size_t after = p + 2 + (sign ? 1 : 0);
      size_t raw_body = kind == '%' ? match_raw_begin(after) : std::string::npos;
      std::string_view text(s_.data() + pos_, p - pos_);
      emit_data(text, sign, kind != '{');
      line_ += count_newlines(text);
      line_starting_ = false;
      if (raw_body != std::string::npos) {
        line_ += count_newlines(std::string_view(s_).substr(after, raw_body - after));
        line_starting_ = raw_body > 0 && s_[raw_body - 1] == '\n';
        lex_raw(raw_body);
      } else if (kind == '#') {
        lex_comment(after);
      } else {
        lex_tag(kind == '%', after);
      }
    }
    push(Tok::Eof, "", line_);
    return std::move(out_);
  }

 private:
  size_t find_opener(size_t from) const {
    for (size_t i = s_.find('{', from); i != std::string::npos; i = s_.find('{', i + 1)) {
      if (i + 1 < s_.size() && (s_[i + 1] == '{' || s_[i + 1] == '%' || s_[i + 1] == '#'))
        return i;
    }
    return std::string::npos;
  }

  void push(Tok t, std::string v, int line) {
    Token tok;
    tok.type = t;
    tok.value = std::move(v);
    tok.line = line;
    out_.push_back(std::move(tok));
  }

  // The data before a tag, after the `-` marker or lstrip_blocks have had their say.
  void emit_data(std::string_view text, char sign, bool block_like) {
    std::string data;
    if (sign == '-') {
      data = rstrip_spaces(text);
    } else {
      data = std::string(text);
      if (sign != '+' && opt_.lstrip_blocks && block_like) {
        size_t nl = text.rfind('\n');
        size_t l_pos = nl == std::string_view::npos ? 0 : nl + 1;
        if ((l_pos > 0 || line_starting_) && all_spaces(text.substr(l_pos))) data.resize(l_pos);
      }
    }
    if (!data.empty()) push(Tok::Data, std::move(data), line_);
  }

  // `{% raw %}`: returns where its body starts, or npos when this is not a raw tag.
  size_t match_raw_begin(size_t i) const {
    i = skip_spaces(s_, i);
    if (s_.compare(i, 3, "raw") != 0) return std::string::npos;
    i = skip_spaces(s_, i + 3);
    if (s_.compare(i, 3, "-%}") == 0) return skip_spaces(s_, i + 3);
    if (s_.compare(i, 2, "%}") == 0) return i + 2;
    return std::string::npos;
  }

  // Length of a block end ("+%}", "-%}\s*" or "%}\n?") at i, or 0.
  size_t block_end_at(size_t i) const {
    if (s_.compare(i, 3, "+%}") == 0) return 3;
    if (s_.compare(i, 3, "-%}") == 0) return skip_spaces(s_, i + 3) - i;
    if (s_.compare(i, 2, "%}") == 0)
      return opt_.trim_blocks && i + 2 < s_.size() && s_[i + 2] == '\n' ? 3 : 2;
    return 0;
  }

  void lex_raw(size_t body) {
    for (size_t k = s_.find("{%", body); k != std::string::npos; k = s_.find("{%", k + 1)) {
      size_t j = k + 2;
      char sign = j < s_.size() && (s_[j] == '-' || s_[j] == '+') ? s_[j] : 0;
      if (sign) ++j;
      j = skip_spaces(s_, j);
      if (s_.compare(j, 6, "endraw") != 0) continue;
      j = skip_spaces(s_, j + 6);
      size_t end = block_end_at(j);
      if (!end) continue;
      std::string_view text(s_.data() + body, k - body);
      emit_data(text, sign, true);
      line_ += count_newlines(std::string_view(s_).substr(body, j + end - body));
      pos_ = j + end;
      line_starting_ = s_[pos_ - 1] == '\n';
      return;
    }
    if (body < s_.size()) syntax_error(line_, "Missing end of raw directive");
    pos_ = body;
  }

  void lex_comment(size_t body) {
    size_t e = s_.find("#}", body);
    if (e == std::string::npos) {
      // jinja2 only notices a missing end when some character follows the opener.
      if (body < s_.size()) syntax_error(line_, "Missing end of comment tag");
      pos_ = body;
      return;
    }
    size_t end;
    if (e > body && s_[e - 1] == '-')
      end = skip_spaces(s_, e + 2);
    else if (e > body && s_[e - 1] == '+')
      end = e + 2;
    else
      end = e + 2 + (opt_.trim_blocks && e + 2 < s_.size() && s_[e + 2] == '\n' ? 1 : 0);
    line_ += count_newlines(std::string_view(s_).substr(body, end - body));
    pos_ = end;
    line_starting_ = s_[pos_ - 1] == '\n';
  }

  void lex_tag(bool block, size_t i) {
    push(block ? Tok::BlockBegin : Tok::VarBegin, "", line_);
    std::string balance;
    while (true) {
      if (i >= s_.size()) {
        pos_ = i;
        return;  // the parser reports the unexpected end
      }
      if (balance.empty()) {
        size_t end = 0;
        if (block) {
          end = block_end_at(i);
        } else if (s_.compare(i, 3, "-}}") == 0) {
          end = skip_spaces(s_, i + 3) - i;
        } else if (s_.compare(i, 2, "}}") == 0) {
          end = 2;
        }
        if (end) {
          push(block ? Tok::BlockEnd : Tok::VarEnd, "", line_);
          line_ += count_newlines(std::string_view(s_).substr(i, end));
          pos_ = i + end;
          line_starting_ = s_[pos_ - 1] == '\n';
          return;
        }
      }
      if (size_t ws = skip_spaces(s_, i); ws > i) {
        line_ += count_newlines(std::string_view(s_).substr(i, ws - i));
        i = ws;
        continue;
      }
      if (size_t n = match_float(i)) {
        Token t;
        t.type = Tok::Float;
        t.value = strip_underscores(s_.substr(i, n));
        // strtod, not stod: a literal out of double's range becomes inf or 0.0 as in Python,
        // where stod would throw.
        t.float_value = std::strtod(t.value.c_str(), nullptr);
        t.line = line_;
        out_.push_back(std::move(t));
        i += n;
        continue;
      }
      if (size_t n = match_integer(i)) {
        lex_integer(i, n);
        i += n;
        continue;
      }
      if (size_t n = match_name(i)) {
        push(Tok::Name, s_.substr(i, n), line_);
        i += n;
        continue;
      }
      if (s_[i] == '\'' || s_[i] == '"') {
        size_t j = i + 1;
        while (j < s_.size() && s_[j] != s_[i]) j += s_[j] == '\\' ? 2 : 1;
        if (j < s_.size()) {
          std::string_view raw(s_.data() + i + 1, j - i - 1);
          push(Tok::String, decode_string(raw, line_), line_);
          line_ += count_newlines(raw);
          i = j + 1;
          continue;
        }
      }
      i += lex_operator(i, balance);
    }
  }

  static std::string strip_underscores(std::string s) {
    std::string r;
    for (char c : s)
      if (c != '_') r.push_back(c);
    return r;
  }

  // (\d+_)*\d+ at i: its length, or 0.
  size_t digits_at(size_t i) const {
    size_t j = i;
    if (j >= s_.size() || !is_digit(s_[j])) return 0;
    while (j < s_.size() && is_digit(s_[j])) ++j;
    while (j + 1 < s_.size() && s_[j] == '_' && is_digit(s_[j + 1])) {
      ++j;
      while (j < s_.size() && is_digit(s_[j])) ++j;
    }
    return j - i;
  }

  size_t match_float(size_t i) const {
    if (i > 0 && s_[i - 1] == '.') return 0;
    size_t n = digits_at(i);
    if (!n) return 0;
    size_t j = i + n;
    auto exponent = [&](size_t k) -> size_t {
      if (k >= s_.size() || (s_[k] != 'e' && s_[k] != 'E')) return 0;
      size_t m = k + 1;
      if (m < s_.size() && (s_[m] == '+' || s_[m] == '-')) ++m;
      size_t d = digits_at(m);
      return d ? m + d - k : 0;
    };
    if (j < s_.size() && s_[j] == '.') {
      size_t f = digits_at(j + 1);
      if (f) {
        size_t k = j + 1 + f;
        return k + exponent(k) - i;
      }
    }
    if (size_t e = exponent(j)) return j + e - i;
    return 0;
  }

  size_t match_integer(size_t i) const {
    if (!is_digit(s_[i])) return 0;
    auto prefixed = [&](char p, auto ok) -> size_t {
      if (s_[i] != '0' || i + 1 >= s_.size() || (s_[i + 1] | 0x20) != p) return 0;
      size_t j = i + 2, last = 0;
      while (j < s_.size()) {
        size_t k = j + (s_[j] == '_' ? 1 : 0);
        if (k < s_.size() && ok(s_[k])) {
          j = k + 1;
          last = j;
        } else {
          break;
        }
      }
      return last ? last - i : 0;
    };
    if (size_t n = prefixed('b', [](char c) { return c == '0' || c == '1'; })) return n;
    if (size_t n = prefixed('o', [](char c) { return c >= '0' && c <= '7'; })) return n;
    if (size_t n = prefixed('x', [](char c) { return hex_value(c) >= 0; })) return n;
    bool zero = s_[i] == '0';
    size_t j = i + 1;
    while (j < s_.size()) {
      size_t k = j + (s_[j] == '_' ? 1 : 0);
      if (k < s_.size() && (zero ? s_[k] == '0' : is_digit(s_[k])))
        j = k + 1;
      else
        break;
    }
    return j - i;
  }

  void lex_integer(size_t i, size_t n) {
    std::string text = strip_underscores(s_.substr(i, n));
    int base = 10;
    size_t start = 0;
    if (text.size() > 1 && text[0] == '0' && (text[1] | 0x20) != '0' && !is_digit(text[1])) {
      char p = static_cast<char>(text[1] | 0x20);
      base = p == 'b' ? 2 : p == 'o' ? 8 : 16;
      start = 2;
    }
    int64_t v = 0;
    for (size_t k = start; k < text.size(); ++k) {
      int d = hex_value(text[k]);
      if (__builtin_mul_overflow(v, base, &v) || __builtin_add_overflow(v, d, &v))
        syntax_error(line_, "integer literal too large");
    }
    Token t;
    t.type = Tok::Int;
    t.value = text;
    t.int_value = v;
    t.line = line_;
    out_.push_back(std::move(t));
  }

  size_t match_name(size_t i) const {
    size_t j = i;
    bool first = true;
    while (j < s_.size()) {
      unsigned char c = static_cast<unsigned char>(s_[j]);
      size_t len = c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
      std::u32string cp = utf8_decode(std::string_view(s_).substr(j, len));
      if (cp.size() != 1) break;
      bool ok = first ? py_is_identifier_start(cp[0]) : py_is_identifier_char(cp[0]);
      if (!ok) break;
      first = false;
      j += len;
    }
    return j - i;
  }

  size_t lex_operator(size_t i, std::string& balance) {
    static const char* kTwo[] = {"//", "**", "==", "!=", ">=", "<="};
    for (const char* op : kTwo) {
      if (s_.compare(i, 2, op) == 0) {
        push(Tok::Op, op, line_);
        return 2;
      }
    }
    char c = s_[i];
    static const std::string kOne = "+-/*%~[](){}><=.:|,;";
    if (kOne.find(c) == std::string::npos) {
      std::string shown = c == '\'' || c == '"' ? std::string(1, c) : s_.substr(i, 1);
      syntax_error(line_, "unexpected char '" + shown + "' at " + std::to_string(i));
    }
    if (c == '(') balance.push_back(')');
    if (c == '[') balance.push_back(']');
    if (c == '{') balance.push_back('}');
    if (c == ')' || c == ']' || c == '}') {
      if (balance.empty()) syntax_error(line_, std::string("unexpected '") + c + "'");
      char expected = balance.back();
      balance.pop_back();
      if (expected != c)
        syntax_error(line_, std::string("unexpected '") + c + "', expected '" + expected + "'");
    }
    push(Tok::Op, std::string(1, c), line_);
    return 1;
  }

  std::string s_;
  LexOptions opt_;
  size_t pos_ = 0;
  int line_ = 1;
  bool line_starting_ = true;
  std::vector<Token> out_;
};

}  // namespace

std::vector<Token> lex(std::string_view source, const LexOptions& opt) {
  std::string src;
  src.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      src.push_back('\n');
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      src.push_back(source[i]);
    }
  }
  if (!src.empty() && src.back() == '\n') src.pop_back();
  return Lexer(std::move(src), opt).run();
}

}  // namespace dflash::jinja
