// The ByteLevel alphabet and the UTF-8 repair rules decode and the stream decoder rely on.
#include <gtest/gtest.h>

#include <set>

#include "tokenizer/byte_level.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/utf8.h"

namespace {

using namespace dflash::tok;

TEST(TokenizerByteLevel, EveryByteRoundTrips) {
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  const std::string text = byte_level_encode(all);
  EXPECT_TRUE(is_valid_utf8(text));
  std::string back;
  ASSERT_TRUE(byte_level_decode(text, back));
  EXPECT_EQ(back, all);
  // The map is a bijection onto 256 distinct code points.
  std::set<uint32_t> cps;
  for (int b = 0; b < 256; ++b) {
    const uint32_t cp = byte_to_code_point(static_cast<uint8_t>(b));
    cps.insert(cp);
    EXPECT_EQ(code_point_to_byte(cp), b);
  }
  EXPECT_EQ(cps.size(), 256u);
}

TEST(TokenizerByteLevel, KnownLetters) {
  EXPECT_EQ(byte_level_encode(" "), "\xC4\xA0");   // U+0120 'Ġ'
  EXPECT_EQ(byte_level_encode("\n"), "\xC4\x8A");  // U+010A 'Ċ'
  EXPECT_EQ(byte_level_encode("a!~"), "a!~");
  EXPECT_EQ(byte_level_encode("\xC3\xA9"), "\xC3\x83\xC2\xA9");  // "é" -> "Ã©"
  std::string out;
  EXPECT_FALSE(byte_level_decode("\xEF\xBD\x9C", out));  // U+FF5C is not in the alphabet
  EXPECT_FALSE(byte_level_decode(" ", out));             // nor is a raw space
}

TEST(TokenizerUtf8, RepairReplacesMaximalSubparts) {
  // Same results as Rust's String::from_utf8_lossy.
  EXPECT_EQ(repair_utf8("ok"), "ok");
  EXPECT_EQ(repair_utf8("\xE0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(repair_utf8("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(repair_utf8("\xF0\x9F\xA4"), "\xEF\xBF\xBD");
  EXPECT_EQ(repair_utf8("\xF0\x9F\xA4" "A"), "\xEF\xBF\xBD" "A");
  EXPECT_EQ(repair_utf8("\xC0\xAF"), "\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(repair_utf8("\xF4\x90\x80\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_FALSE(is_valid_utf8("abcdefgh\xFF"));
  EXPECT_TRUE(is_valid_utf8("abcdefghij\xF0\x9F\xA4\x96"));
}

TEST(TokenizerUtf8, AppendCompleteHoldsBackOnlyCompletableTails) {
  std::string out;
  EXPECT_EQ(append_complete_utf8("ab\xF0\x9F", out), 2u);
  EXPECT_EQ(out, "ab");
  out.clear();
  EXPECT_EQ(append_complete_utf8("\x80" "a\xE2\x82", out), 2u);
  EXPECT_EQ(out, "\xEF\xBF\xBD" "a");
}

TEST(TokenizerNfc, ComposesAndLeavesAsciiAlone) {
  EXPECT_EQ(nfc("e\xCC\x81"), "\xC3\xA9");
  EXPECT_EQ(nfc("plain ascii"), "plain ascii");
  EXPECT_EQ(nfc("x e\xCC\x81 y \xE2\x84\xAB z"), "x \xC3\xA9 y \xC3\x85 z");  // U+212B -> U+00C5
  EXPECT_EQ(nfc("\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8"), "\xEA\xB0\x81");   // jamo -> U+AC01
  EXPECT_EQ(nfc(std::string("a\0b", 3)), std::string("a\0b", 3));
}

}  // namespace
