#include "chat/jinja_unicode.h"

#include <utf8proc.h>

#include "tokenizer/utf8.h"

namespace dflash::jinja {

std::u32string utf8_decode(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      out.push_back(c);
      ++i;
      continue;
    }
    int len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 0;
    char32_t cp = len == 4 ? (c & 0x07) : len == 3 ? (c & 0x0F) : (c & 0x1F);
    bool ok = len > 0 && i + len <= s.size();
    for (int k = 1; ok && k < len; ++k) {
      unsigned char cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xC0) != 0x80) ok = false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    if (!ok) {
      // Invalid bytes cannot come from a Python str; map them to U+FFFD rather than fail.
      out.push_back(0xFFFD);
      ++i;
      continue;
    }
    out.push_back(cp);
    i += len;
  }
  return out;
}

void utf8_append(std::string& out, char32_t cp) { tok::append_utf8(out, uint32_t(cp)); }

std::string utf8_encode(std::u32string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : s) utf8_append(out, c);
  return out;
}

size_t utf8_length(std::string_view s) {
  size_t n = 0;
  for (char c : s)
    if ((static_cast<unsigned char>(c) & 0xC0) != 0x80) ++n;
  return n;
}

bool is_ascii(std::string_view s) {
  for (char c : s)
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  return true;
}

static utf8proc_category_t cat(char32_t c) {
  return utf8proc_category(static_cast<utf8proc_int32_t>(c));
}

bool py_isspace(char32_t c) {
  if (c < 0x80) return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20);
  switch (c) {
    case 0x85: case 0xA0: case 0x1680: case 0x2028: case 0x2029: case 0x202F: case 0x205F:
    case 0x3000:
      return true;
    default:
      return c >= 0x2000 && c <= 0x200A;
  }
}

bool py_isprintable(char32_t c) {
  if (c == ' ') return true;
  switch (cat(c)) {
    case UTF8PROC_CATEGORY_CC: case UTF8PROC_CATEGORY_CF: case UTF8PROC_CATEGORY_CS:
    case UTF8PROC_CATEGORY_CO: case UTF8PROC_CATEGORY_CN: case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP: case UTF8PROC_CATEGORY_ZS:
      return false;
    default:
      return true;
  }
}

bool py_isalpha(char32_t c) {
  auto k = cat(c);
  return k == UTF8PROC_CATEGORY_LU || k == UTF8PROC_CATEGORY_LL || k == UTF8PROC_CATEGORY_LT ||
         k == UTF8PROC_CATEGORY_LM || k == UTF8PROC_CATEGORY_LO;
}

bool py_isdecimal(char32_t c) { return cat(c) == UTF8PROC_CATEGORY_ND; }

bool py_isdigit(char32_t c) {
  // Numeric_Type=Digit beyond Nd: superscripts and the circled/parenthesised digit blocks.
  return py_isdecimal(c) || c == 0xB2 || c == 0xB3 || c == 0xB9 || (c >= 0x2070 && c <= 0x2079) ||
         (c >= 0x2080 && c <= 0x2089) || (c >= 0x2460 && c <= 0x2468) ||
         (c >= 0x2474 && c <= 0x247C) || (c >= 0x2488 && c <= 0x2490);
}

bool py_isalnum(char32_t c) {
  auto k = cat(c);
  return py_isalpha(c) || k == UTF8PROC_CATEGORY_ND || k == UTF8PROC_CATEGORY_NL ||
         k == UTF8PROC_CATEGORY_NO;
}

bool py_islower(char32_t c) {
  auto k = cat(c);
  if (k == UTF8PROC_CATEGORY_LL) return true;
  // Other_Lowercase letters (ª, º, modifier letters) have no uppercase but count as lower.
  return c == 0xAA || c == 0xBA || (k == UTF8PROC_CATEGORY_LM && c >= 0x2B0 && c <= 0x2B8);
}

bool py_isupper(char32_t c) { return cat(c) == UTF8PROC_CATEGORY_LU; }

bool py_iscased(char32_t c) {
  return py_islower(c) || py_isupper(c) || cat(c) == UTF8PROC_CATEGORY_LT;
}

bool py_islinebreak(char32_t c) {
  return c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D ||
         c == 0x1E || c == 0x85 || c == 0x2028 || c == 0x2029;
}

bool py_is_identifier_start(char32_t c) {
  if (c < 0x80) return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
  return py_isalpha(c) || cat(c) == UTF8PROC_CATEGORY_NL;
}

bool py_is_identifier_char(char32_t c) {
  if (c < 0x80) return py_is_identifier_start(c) || (c >= '0' && c <= '9');
  auto k = cat(c);
  return py_is_identifier_start(c) || k == UTF8PROC_CATEGORY_MN || k == UTF8PROC_CATEGORY_MC ||
         k == UTF8PROC_CATEGORY_ND || k == UTF8PROC_CATEGORY_PC;
}

namespace {

// Unconditional multi-character mappings from Unicode's SpecialCasing.txt that Python applies.
struct Special {
  char32_t c;
  const char32_t* upper;
  const char32_t* title;
};
const Special kSpecial[] = {
    {0x00DF, U"SS", U"Ss"},           {0x0149, U"\u02BCN", U"\u02BCN"},
    {0x01F0, U"J\u030C", U"J\u030C"}, {0x0587, U"\u0535\u0552", U"\u0535\u0582"},
    {0x1E96, U"H\u0331", U"H\u0331"}, {0x1E97, U"T\u0308", U"T\u0308"},
    {0x1E98, U"W\u030A", U"W\u030A"}, {0x1E99, U"Y\u030A", U"Y\u030A"},
    {0x1E9A, U"A\u02BE", U"A\u02BE"}, {0xFB00, U"FF", U"Ff"},
    {0xFB01, U"FI", U"Fi"},           {0xFB02, U"FL", U"Fl"},
    {0xFB03, U"FFI", U"Ffi"},         {0xFB04, U"FFL", U"Ffl"},
    {0xFB05, U"ST", U"St"},           {0xFB06, U"ST", U"St"},
};

const Special* find_special(char32_t c) {
  for (const auto& s : kSpecial)
    if (s.c == c) return &s;
  return nullptr;
}

}  // namespace

void py_append_upper(std::u32string& out, char32_t c) {
  if (c < 0x80) {
    out.push_back(c >= 'a' && c <= 'z' ? c - 32 : c);
    return;
  }
  if (const Special* s = find_special(c)) {
    out += s->upper;
    return;
  }
  out.push_back(static_cast<char32_t>(utf8proc_toupper(static_cast<utf8proc_int32_t>(c))));
}

void py_append_lower(std::u32string& out, char32_t c) {
  if (c < 0x80) {
    out.push_back(c >= 'A' && c <= 'Z' ? c + 32 : c);
    return;
  }
  if (c == 0x130) {  // İ lowers to i + combining dot above
    out += U"i\u0307";
    return;
  }
  out.push_back(static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c))));
}

void py_append_title(std::u32string& out, char32_t c) {
  if (c < 0x80) {
    out.push_back(c >= 'a' && c <= 'z' ? c - 32 : c);
    return;
  }
  if (const Special* s = find_special(c)) {
    out += s->title;
    return;
  }
  out.push_back(static_cast<char32_t>(utf8proc_totitle(static_cast<utf8proc_int32_t>(c))));
}

namespace {

// Python lowercases a capital sigma at the end of a word to the final form.
bool final_sigma(const std::u32string& s, size_t i) {
  bool before = false;
  for (size_t j = i; j-- > 0;) {
    if (py_iscased(s[j])) {
      before = true;
      break;
    }
    if (cat(s[j]) != UTF8PROC_CATEGORY_MN) break;
  }
  if (!before) return false;
  for (size_t j = i + 1; j < s.size(); ++j) {
    if (py_iscased(s[j])) return false;
    if (cat(s[j]) != UTF8PROC_CATEGORY_MN) break;
  }
  return true;
}

void append_lower_at(std::u32string& out, const std::u32string& s, size_t i) {
  if (s[i] == 0x3A3 && final_sigma(s, i))
    out.push_back(0x3C2);
  else
    py_append_lower(out, s[i]);
}

}  // namespace

std::string py_upper(std::string_view s) {
  if (is_ascii(s)) {
    std::string r(s);
    for (char& c : r)
      if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 32);
    return r;
  }
  std::u32string out;
  for (char32_t c : utf8_decode(s)) py_append_upper(out, c);
  return utf8_encode(out);
}

std::string py_lower(std::string_view s) {
  if (is_ascii(s)) {
    std::string r(s);
    for (char& c : r)
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c + 32);
    return r;
  }
  std::u32string u = utf8_decode(s), out;
  for (size_t i = 0; i < u.size(); ++i) append_lower_at(out, u, i);
  return utf8_encode(out);
}

std::string py_capitalize(std::string_view s) {
  std::u32string u = utf8_decode(s), out;
  for (size_t i = 0; i < u.size(); ++i) {
    if (i == 0)
      py_append_title(out, u[i]);
    else
      append_lower_at(out, u, i);
  }
  return utf8_encode(out);
}

std::string py_str_title(std::string_view s) {
  std::u32string u = utf8_decode(s), out;
  bool prev_cased = false;
  for (size_t i = 0; i < u.size(); ++i) {
    char32_t c = u[i];
    if (prev_cased)
      append_lower_at(out, u, i);
    else
      py_append_title(out, c);
    prev_cased = py_iscased(c);
  }
  return utf8_encode(out);
}

std::string py_swapcase(std::string_view s) {
  std::u32string u = utf8_decode(s), out;
  for (size_t i = 0; i < u.size(); ++i) {
    if (py_isupper(u[i]))
      append_lower_at(out, u, i);
    else if (py_islower(u[i]))
      py_append_upper(out, u[i]);
    else
      out.push_back(u[i]);
  }
  return utf8_encode(out);
}

}  // namespace dflash::jinja
