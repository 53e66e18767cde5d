// safetensors headers whose sizes do not add up must fail with a dflash::Error naming the
// tensor, before any byte of data is read.
#include "formats/safetensors.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <string>

#include "util/error.h"

namespace dflash {
namespace {

// An 8-byte little-endian header length, the JSON header, then `data_bytes` zero bytes.
std::string write_file(const std::string& name, const std::string& header, size_t data_bytes) {
  const std::string path = ::testing::TempDir() + "/st_test_" + std::to_string(::getpid()) + "_" + name + ".safetensors";
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) f.put(char((n >> (8 * i)) & 0xff));
  f << header << std::string(data_bytes, '\0');
  return path;
}

std::string error_of(const std::string& path) {
  try {
    SafetensorsFile file(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Safetensors, ShapeWhoseByteSizeOverflowsIsRefusedNotMatchedToAnEmptyRange) {
  // 2^32 x 2^32 floats: 2^66 bytes, which wraps to 0 in 64-bit arithmetic.
  const std::string p = write_file("overflow", R"({"t":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,0]}})", 0);
  const std::string e = error_of(p);
  EXPECT_NE(std::string::npos, e.find("'t'")) << e;
  EXPECT_NE(std::string::npos, e.find("more elements")) << e;
}

TEST(Safetensors, ThreeDimensionsWhoseProductWrapsAreRefused) {
  const std::string p = write_file("overflow3", R"({"t":{"dtype":"BF16","shape":[1099511627776,1099511627776,16],"data_offsets":[0,0]}})", 0);
  EXPECT_NE(std::string::npos, error_of(p).find("more elements")) << error_of(p);
}

TEST(Safetensors, EmptyTensorsAndExactSizesStillLoad) {
  const std::string p = write_file("ok", R"({"e":{"dtype":"F32","shape":[0,4294967296],"data_offsets":[0,0]},"t":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]}})", 24);
  SafetensorsFile f(p);
  ASSERT_EQ(2u, f.tensors().size());
  EXPECT_EQ(6, f.tensors().at("t").numel());
  EXPECT_EQ(0, f.tensors().at("e").numel());
}

TEST(Safetensors, ByteRangeThatDisagreesWithTheShapeIsRefused) {
  const std::string p = write_file("mismatch", R"({"t":{"dtype":"F32","shape":[2,3],"data_offsets":[0,20]}})", 24);
  EXPECT_NE(std::string::npos, error_of(p).find("does not match")) << error_of(p);
}

// A number past 2^64 parses as a double; converting it to an integer type was undefined (the
// fuzzer's 922337203685477580884 in a shape, caught by UBSan). Non-integers, negatives and
// such numbers in shape or data_offsets are refused by name.
TEST(Safetensors, ShapesAndOffsetsThatAreNotNonNegativeIntegersAreRefused) {
  const char* bad[] = {
      R"({"t":{"dtype":"BF16","shape":[2,922337203685477580884,96],"data_offsets":[0,0]}})",
      R"({"t":{"dtype":"F32","shape":[2,-3],"data_offsets":[0,0]}})",
      R"({"t":{"dtype":"F32","shape":[2.5],"data_offsets":[0,0]}})",
      R"({"t":{"dtype":"F32","shape":[2,3],"data_offsets":[0,1e30]}})",
      R"({"t":{"dtype":"F32","shape":"6","data_offsets":[0,24]}})",
  };
  int i = 0;
  for (const char* h : bad) {
    const std::string e = error_of(write_file("notint" + std::to_string(i++), h, 24));
    EXPECT_NE(std::string::npos, e.find("'t'")) << h << ": " << e;
    EXPECT_TRUE(e.find("non-negative integer") != std::string::npos || e.find("not a list") != std::string::npos)
        << h << ": " << e;
  }
}

}  // namespace
}  // namespace dflash
