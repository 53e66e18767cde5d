#include "tokenizer/byte_level.h"

#include <array>

#include "tokenizer/utf8.h"

namespace dflash::tok {
namespace {

struct Tables {
  std::array<uint32_t, 256> to_cp{};
  std::array<int16_t, 324> to_byte{};  // every code point of the alphabet is below 324

  Tables() {
    to_byte.fill(-1);
    // Printable Latin-1 bytes stand for themselves; the other 68 bytes are shifted to
    // U+0100.. in byte order.
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      to_cp[b] = printable ? static_cast<uint32_t>(b) : next++;
      to_byte[to_cp[b]] = static_cast<int16_t>(b);
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

uint32_t byte_to_code_point(uint8_t b) { return tables().to_cp[b]; }

int code_point_to_byte(uint32_t cp) {
  return cp < tables().to_byte.size() ? tables().to_byte[cp] : -1;
}

bool byte_level_decode(std::string_view text, std::string& out) {
  out.clear();
  size_t i = 0;
  while (i < text.size()) {
    const Utf8Step st = utf8_step(text, i);
    if (st.status != Utf8Status::Valid) return false;
    size_t j = i;
    const int b = code_point_to_byte(next_code_point(text, j));
    if (b < 0) return false;
    out.push_back(static_cast<char>(b));
    i += st.len;
  }
  return true;
}

std::string byte_level_encode(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) append_utf8(out, byte_to_code_point(static_cast<uint8_t>(c)));
  return out;
}

}  // namespace dflash::tok
