// GGUF reader and writer: round trip of every value type, and malformed files that must fail
// with a dflash::Error naming the problem (the ASan bad-input test covers the CLI side).
#include "formats/gguf.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <fstream>

#include "util/error.h"

namespace dflash {
namespace {

std::string tmp_path(const std::string& name) {
  return ::testing::TempDir() + "/gguf_test_" + std::to_string(::getpid()) + "_" + name + ".gguf";
}

std::string read_all(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

void write_all(const std::string& p, const std::string& s) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(s.data(), std::streamsize(s.size()));
}

// A file with one key of every type, a nested array and two tensors.
std::string make_sample() {
  GgufWriter w;
  GgufValue u8;
  u8.type = GgufValueType::U8, u8.u = 200;
  GgufValue i64;
  i64.type = GgufValueType::I64, i64.i = -5000000000LL;
  GgufValue f64;
  f64.type = GgufValueType::F64, f64.f = 0.125;
  w.add("general.architecture", GgufValue::str("qwen3"));
  w.add("a.u8", u8);
  w.add("a.i64", i64);
  w.add("a.f64", f64);
  w.add("a.u32", GgufValue::u32(4000000000u));
  w.add("a.i32", GgufValue::i32(-7));
  w.add("a.f32", GgufValue::f32(1.5f));
  w.add("a.bool", GgufValue::boolean(true));
  w.add("a.strings", GgufValue::array(GgufValueType::STRING, {GgufValue::str("x"), GgufValue::str(""), GgufValue::str("\xc3\xa9")}));
  w.add("a.nested", GgufValue::array(GgufValueType::ARRAY, {GgufValue::array(GgufValueType::I32, {GgufValue::i32(1), GgufValue::i32(2)})}));
  std::vector<uint8_t> f32(4 * 3 * 2);
  for (size_t i = 0; i < f32.size(); ++i) f32[i] = uint8_t(i);
  w.add_tensor("t.f32", {3, 2}, GgmlType::F32, f32);
  w.add_tensor("t.q8", {64}, GgmlType::Q8_0, std::vector<uint8_t>(68, 7));
  const std::string p = tmp_path("sample");
  w.write(p);
  return p;
}

TEST(Gguf, RoundTripsEveryValueType) {
  const std::string p = make_sample();
  GgufFile f(p);
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.alignment(), 32u);
  EXPECT_EQ(f.get_string("general.architecture").value(), "qwen3");
  EXPECT_EQ(f.get_int("a.u8").value(), 200);
  EXPECT_EQ(f.get_int("a.i64").value(), -5000000000LL);
  EXPECT_EQ(f.get_float("a.f64").value(), 0.125);
  EXPECT_EQ(f.get_int("a.u32").value(), 4000000000LL);
  EXPECT_EQ(f.get_int("a.i32").value(), -7);
  EXPECT_EQ(f.get_float("a.f32").value(), 1.5);
  EXPECT_TRUE(f.get_bool("a.bool").value());
  const GgufValue* s = f.find("a.strings");
  ASSERT_TRUE(s && s->is_array_of(GgufValueType::STRING));
  ASSERT_EQ(s->items.size(), 3u);
  EXPECT_EQ(s->items[2].s, "\xc3\xa9");
  const GgufValue* n = f.find("a.nested");
  ASSERT_TRUE(n && n->is_array_of(GgufValueType::ARRAY));
  EXPECT_EQ(n->items.at(0).items.at(1).i, 2);
  EXPECT_FALSE(f.get_int("absent").has_value());
  EXPECT_THROW(f.get_int("general.architecture"), Error);  // present, wrong type
  const GgufTensor* t = f.tensor("t.f32");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->ne, (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(t->nbytes, 24u);
  EXPECT_EQ(t->data[5], 5);
  const GgufTensor* q = f.tensor("t.q8");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->nbytes, 68u);
  EXPECT_EQ(q->offset % 32, 0u);
  EXPECT_EQ(q->data[67], 7);
  std::remove(p.c_str());
}

void expect_error(const std::string& bytes, const std::string& word) {
  const std::string p = tmp_path("bad");
  write_all(p, bytes);
  try {
    GgufFile f(p);
    ADD_FAILURE() << "no error; wanted one containing '" << word << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(word), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << "error must name the file: " << e.what();
  }
  std::remove(p.c_str());
}

template <class T>
void put(std::string& s, size_t at, T v) {
  std::memcpy(&s[at], &v, sizeof(T));
}

TEST(Gguf, EveryTruncationFailsCleanly) {
  const std::string p = make_sample();
  const std::string full = read_all(p);
  std::remove(p.c_str());
  // Every prefix shorter than the end of the last tensor's bytes (68 of its 96 padded ones)
  // must be refused: nothing may be read past the end.
  for (size_t n = 0; n + 28 < full.size(); ++n) {
    const std::string q = tmp_path("trunc");
    write_all(q, full.substr(0, n));
    EXPECT_THROW(GgufFile f(q), Error) << "prefix of " << n << " bytes was accepted";
    std::remove(q.c_str());
  }
}

TEST(Gguf, MalformedHeaders) {
  const std::string p = make_sample();
  const std::string good = read_all(p);
  std::remove(p.c_str());
  std::string s = good;
  s[0] = 'X';
  expect_error(s, "magic");
  s = good;
  put<uint32_t>(s, 4, 1);
  expect_error(s, "version");
  s = good;
  put<uint64_t>(s, 8, uint64_t(1) << 60);
  expect_error(s, "tensor count");
  s = good;
  put<uint64_t>(s, 16, uint64_t(1) << 60);
  expect_error(s, "metadata count");
  s = good;
  put<uint64_t>(s, 24, uint64_t(1) << 62);  // first key's length
  expect_error(s, "string length");
  s = good;
  // first key "general.architecture" (20 bytes): its value type follows at 24 + 8 + 20
  put<uint32_t>(s, 52, 77);
  expect_error(s, "unknown value type");
}

// Locates a tensor info field by parsing backwards from the known name.
size_t tensor_info_at(const std::string& s, const std::string& name) {
  const size_t at = s.find(name);
  EXPECT_NE(at, std::string::npos);
  return at + name.size();  // n_dims
}

TEST(Gguf, MalformedTensorInfos) {
  const std::string p = make_sample();
  const std::string good = read_all(p);
  std::remove(p.c_str());
  const size_t nd = tensor_info_at(good, "t.f32");  // n_dims u32, dims 2 x u64, type u32, offset u64
  std::string s = good;
  put<uint32_t>(s, nd, 9);
  expect_error(s, "dimensions");
  s = good;
  put<uint64_t>(s, nd + 4, uint64_t(1) << 50);
  expect_error(s, "absurd dimension");
  s = good;
  put<uint64_t>(s, nd + 4, uint64_t(1) << 39);
  put<uint64_t>(s, nd + 12, uint64_t(1) << 39);
  expect_error(s, "overflows");
  s = good;
  put<uint32_t>(s, nd + 20, 99);
  expect_error(s, "unknown tensor type 99");
  s = good;
  put<uint64_t>(s, nd + 24, uint64_t(1) << 40);
  expect_error(s, "past the end");
  s = good;
  put<uint64_t>(s, nd + 24, 4);
  expect_error(s, "alignment");
  s = good;
  const size_t nq = tensor_info_at(good, "t.q8");
  put<uint64_t>(s, nq + 4, 40);
  expect_error(s, "multiple of the Q8_0 block");
}

TEST(Gguf, AlignmentKey) {
  GgufWriter w;
  w.add("general.alignment", GgufValue::u32(3));
  const std::string p = tmp_path("align");
  w.write(p);
  EXPECT_THROW(GgufFile f(p), Error);
  std::remove(p.c_str());
}

}  // namespace
}  // namespace dflash
