#pragma once
// UTF-8 scanning shared by encode (input repair), decode (lossy output) and the stream decoder.
// Invalid input is replaced the way Rust's String::from_utf8_lossy does (one U+FFFD per maximal
// invalid subpart), because that is what Hugging Face's decode returns.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace dflash::tok {

enum class Utf8Status { Valid, Invalid, Truncated };

struct Utf8Step {
  Utf8Status status;
  size_t len;  // bytes consumed: the sequence, the maximal invalid subpart, or what is left
};

// Classifies the sequence starting at s[i] (i < s.size()). Truncated means a well-formed prefix
// that runs into the end of s, so more bytes could still complete it.
Utf8Step utf8_step(std::string_view s, size_t i);

bool is_valid_utf8(std::string_view s);

// Every invalid or truncated sequence becomes U+FFFD.
std::string repair_utf8(std::string_view s);

// Appends the well-formed part of s (invalid subparts as U+FFFD) to out and returns how many
// trailing bytes were held back because they are an incomplete but still completable sequence.
size_t append_complete_utf8(std::string_view s, std::string& out);

void append_utf8(std::string& out, uint32_t cp);

// Decodes the code point at s[i] of valid UTF-8 and advances i.
uint32_t next_code_point(std::string_view s, size_t& i);

inline constexpr std::string_view kReplacementChar = "\xEF\xBF\xBD";

}  // namespace dflash::tok
