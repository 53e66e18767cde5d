#pragma once
// GPT-2's ByteLevel alphabet: every byte is shown as one printable code point so that a vocab
// stored as JSON text can hold arbitrary bytes. The engine works on raw bytes and uses this map
// only to read the vocab and merges, and to write token text back out.
#include <cstdint>
#include <string>
#include <string_view>

namespace dflash::tok {

// The code point that stands for byte b.
uint32_t byte_to_code_point(uint8_t b);

// The byte a code point stands for, or -1 when the code point is not in the alphabet.
int code_point_to_byte(uint32_t cp);

// Vocab text -> raw bytes. Returns false (and leaves out partial) when a character is not in
// the alphabet, e.g. an added token such as "<｜tool▁sep｜>".
bool byte_level_decode(std::string_view text, std::string& out);

// Raw bytes -> vocab text.
std::string byte_level_encode(std::string_view bytes);

// The regex ByteLevel applies itself when use_regex is true (GPT-2's pre-tokenizer).
inline constexpr const char* kGpt2SplitPattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

}  // namespace dflash::tok
