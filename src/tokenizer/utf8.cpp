#include "tokenizer/utf8.h"

namespace dflash::tok {

Utf8Step utf8_step(std::string_view s, size_t i) {
  const auto b0 = static_cast<uint8_t>(s[i]);
  if (b0 < 0x80) return {Utf8Status::Valid, 1};
  size_t need;           // continuation bytes after the lead byte
  uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the first continuation byte (Unicode table 3-7)
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 1;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 2;
    if (b0 == 0xE0) lo = 0xA0;  // overlong
    if (b0 == 0xED) hi = 0x9F;  // surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 3;
    if (b0 == 0xF0) lo = 0x90;  // overlong
    if (b0 == 0xF4) hi = 0x8F;  // above U+10FFFF
  } else {
    return {Utf8Status::Invalid, 1};
  }
  size_t k = 1;
  for (; k <= need; ++k) {
    if (i + k >= s.size()) return {Utf8Status::Truncated, s.size() - i};
    const auto b = static_cast<uint8_t>(s[i + k]);
    const uint8_t l = k == 1 ? lo : 0x80, h = k == 1 ? hi : 0xBF;
    if (b < l || b > h) return {Utf8Status::Invalid, k};
  }
  return {Utf8Status::Valid, k};
}

bool is_valid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    // ASCII runs dominate real prompts; skip them eight bytes at a time.
    while (i + 8 <= s.size()) {
      uint64_t w;
      __builtin_memcpy(&w, s.data() + i, 8);
      if (w & 0x8080808080808080ull) break;
      i += 8;
    }
    if (i >= s.size()) break;
    const Utf8Step st = utf8_step(s, i);
    if (st.status != Utf8Status::Valid) return false;
    i += st.len;
  }
  return true;
}

std::string repair_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 8);
  size_t i = 0;
  while (i < s.size()) {
    const Utf8Step st = utf8_step(s, i);
    if (st.status == Utf8Status::Valid) {
      out.append(s.substr(i, st.len));
    } else {
      out.append(kReplacementChar);
    }
    i += st.len;
  }
  return out;
}

size_t append_complete_utf8(std::string_view s, std::string& out) {
  size_t i = 0;
  while (i < s.size()) {
    const Utf8Step st = utf8_step(s, i);
    if (st.status == Utf8Status::Truncated) return s.size() - i;
    if (st.status == Utf8Status::Valid) {
      out.append(s.substr(i, st.len));
    } else {
      out.append(kReplacementChar);
    }
    i += st.len;
  }
  return 0;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

uint32_t next_code_point(std::string_view s, size_t& i) {
  const auto b0 = static_cast<uint8_t>(s[i]);
  if (b0 < 0x80) {
    ++i;
    return b0;
  }
  const size_t n = b0 >= 0xF0 ? 4 : b0 >= 0xE0 ? 3 : 2;
  uint32_t cp = b0 & (0x7F >> n);
  for (size_t k = 1; k < n && i + k < s.size(); ++k) {
    cp = (cp << 6) | (static_cast<uint8_t>(s[i + k]) & 0x3F);
  }
  i += n;
  return cp;
}

}  // namespace dflash::tok
