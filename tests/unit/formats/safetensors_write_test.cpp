// The streaming safetensors writer: what it writes reads back through SafetensorsFile with the
// names, dtypes, shapes and bytes given, rows in order, data 8-byte aligned.
#include "formats/safetensors_write.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "formats/safetensors.h"

namespace dflash {
namespace {

TEST(SafetensorsWrite, RoundTripsNamesShapesAndRowsInOrder) {
  const std::string path = ::testing::TempDir() + "/stw_" + std::to_string(::getpid()) + ".safetensors";
  const std::vector<TensorToWrite> ts = {{"a.weight", DType::F32, {3, 2}}, {"b", DType::BF16, {5}}, {"c", DType::F16, {2, 2, 3}}};
  write_safetensors(path, ts, [](size_t i, int64_t r, uint8_t* out) {
    const size_t cols = i == 0 ? 2 : i == 1 ? 5 : 3, w = i == 0 ? 4 : 2;
    for (size_t c = 0; c < cols * w; ++c) out[c] = uint8_t(i * 100 + size_t(r) * 10 + c);
  });
  SafetensorsFile f(path);
  ASSERT_EQ(3u, f.tensors().size());
  const TensorView& a = f.tensors().at("a.weight");
  EXPECT_EQ(DType::F32, a.dtype);
  EXPECT_EQ((std::vector<int64_t>{3, 2}), a.shape);
  ASSERT_EQ(24u, a.nbytes);
  EXPECT_EQ(0u, reinterpret_cast<uintptr_t>(a.data) % 8);
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 8; ++c) EXPECT_EQ(uint8_t(r * 10 + c), a.data[r * 8 + c]);
  const TensorView& b = f.tensors().at("b");
  EXPECT_EQ(DType::BF16, b.dtype);
  EXPECT_EQ(10u, b.nbytes);
  EXPECT_EQ(uint8_t(100 + 9), b.data[9]);
  const TensorView& c = f.tensors().at("c");
  EXPECT_EQ((std::vector<int64_t>{2, 2, 3}), c.shape);
  EXPECT_EQ(24u, c.nbytes);
  EXPECT_EQ(uint8_t(200 + 3 * 10 + 5), c.data[3 * 6 + 5]);  // row 3 (the last of 2x2), byte 5
  ::unlink(path.c_str());
}

}  // namespace
}  // namespace dflash
