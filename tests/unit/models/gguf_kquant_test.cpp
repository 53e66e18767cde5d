// Q4_K / Q6_K tensors in a GGUF are used where they lie in the mapping (no conversion at
// load), decode to what the format defines, convert on request, and a conversion to a
// K-quant of rows that are not whole 256-super-blocks is refused with a clear message.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>

#include "formats/gguf.h"
#include "kernels/kernels.h"
#include "models/gguf_weights.h"
#include "util/error.h"

namespace dflash {
namespace {

std::string tmp_path(const std::string& name) {
  return ::testing::TempDir() + "/gguf_kquant_" + std::to_string(::getpid()) + "_" + name + ".gguf";
}

std::vector<float> ramp(int64_t n, float scale) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = scale * std::sin(0.37f * float(i)) + 0.01f * float(i % 7);
  return v;
}

std::vector<uint8_t> bytes_of(const WeightMatrix& w) { return std::vector<uint8_t>(w.data, w.data + w.bytes()); }

TEST(GgufKQuant, TensorsStayMappedAndDecode) {
  const int64_t rows = 5, cols = 512;
  const auto src = ramp(rows * cols, 0.5f);
  const WeightMatrix q4 = make_weight_matrix(src.data(), rows, cols, WType::Q4_K);
  const WeightMatrix q6 = make_weight_matrix(src.data(), rows, cols, WType::Q6_K);
  const auto f32 = ramp(3 * 96, 1.0f);
  GgufWriter wr;
  wr.add("general.architecture", GgufValue::str("qwen3"));
  wr.add_tensor("a.q4k", {cols, rows}, GgmlType::Q4_K, bytes_of(q4));
  wr.add_tensor("a.q6k", {cols, rows}, GgmlType::Q6_K, bytes_of(q6));
  std::vector<uint8_t> raw(f32.size() * 4);
  std::memcpy(raw.data(), f32.data(), raw.size());
  wr.add_tensor("a.f32_96", {96, 3}, GgmlType::F32, raw);
  const std::string path = tmp_path("mapped");
  wr.write(path);

  const GgufFile f(path);
  const GgufWeights L(f);
  for (auto [name, want, type] : {std::tuple{"a.q4k", &q4, WType::Q4_K}, std::tuple{"a.q6k", &q6, WType::Q6_K}}) {
    const WeightMatrix w = L.matrix(name, rows, cols, std::nullopt);
    EXPECT_EQ(w.type, type) << name;
    EXPECT_EQ(w.owner, nullptr) << name << ": read in place, not copied";
    EXPECT_EQ(w.data, f.tensor(name)->data) << name;
    ASSERT_EQ(bytes_of(w), bytes_of(*want)) << name;
    // Converted at load (--weights f32): the decoded rows, which also serve embedding lookups.
    const WeightMatrix as_f32 = L.matrix(name, rows, cols, WType::F32);
    std::vector<float> row(static_cast<size_t>(cols));
    for (int64_t r = 0; r < rows; ++r) {
      dequantize_row(w, r, row.data());
      ASSERT_EQ(std::memcmp(row.data(), as_f32.row(r), size_t(cols) * 4), 0) << name << " row " << r;
      double err2 = 0, ref2 = 0;
      for (int64_t k = 0; k < cols; ++k) {
        err2 += std::pow(row[size_t(k)] - src[size_t(r * cols + k)], 2);
        ref2 += std::pow(src[size_t(r * cols + k)], 2);
      }
      EXPECT_LT(std::sqrt(err2 / ref2), type == WType::Q4_K ? 0.12 : 0.03) << name << " row " << r;
    }
    // The native matmul on the mapped blocks equals the reference matmul on them.
    const auto x = ramp(2 * cols, 1.0f);
    std::vector<float> y(2 * rows), yr(2 * rows);
    matmul(x.data(), 2, w, y.data(), nullptr);
    ref::matmul(x.data(), 2, w, yr.data());
    EXPECT_EQ(y, yr) << name;
  }
  // Converting to a K-quant needs rows of whole 256-super-blocks.
  try {
    L.matrix("a.f32_96", 3, 96, WType::Q4_K);
    FAIL() << "96 columns were stored as q4_k";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("a.f32_96"), std::string::npos) << m;
    EXPECT_NE(m.find("not a multiple of 256"), std::string::npos) << m;
    EXPECT_NE(m.find("q4_k"), std::string::npos) << m;
  }
  EXPECT_NO_THROW(L.matrix("a.f32_96", 3, 96, WType::Q8_0));  // 32-blocks fit
  ::unlink(path.c_str());
}

TEST(GgufKQuant, WriterAndReaderRefusePartialSuperBlocks) {
  GgufWriter wr;
  EXPECT_THROW(wr.add_tensor("x", {128, 2}, GgmlType::Q4_K, std::vector<uint8_t>(144)), Error);
  EXPECT_THROW(wr.add_tensor("x", {128, 2}, GgmlType::Q6_K, std::vector<uint8_t>(210)), Error);
}

}  // namespace
}  // namespace dflash
