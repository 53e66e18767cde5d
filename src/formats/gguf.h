#pragma once
// GGUF (llama.cpp's single-file model format), versions 2 and 3: header, typed metadata,
// tensor infos, then the aligned data section, which stays memory-mapped. Every count, length
// and offset is checked against the bytes that remain before it is used.
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "util/mapped_file.h"

namespace dflash {

enum class GgufValueType : uint32_t {
  U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, F32 = 6, BOOL = 7, STRING = 8,
  ARRAY = 9, U64 = 10, I64 = 11, F64 = 12
};

// ggml tensor types this reader knows the block layout of (others are refused by number).
enum class GgmlType : uint32_t {
  F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9,
  Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15,
  I8 = 24, I16 = 25, I32 = 26, I64 = 27, F64 = 28, BF16 = 30
};

const char* ggml_type_name(GgmlType t);
// Elements per block and bytes per block; false for a type number this reader does not know.
bool ggml_type_layout(uint32_t type, int64_t& block, int64_t& block_bytes);

struct GgufValue {
  GgufValueType type = GgufValueType::U8;
  uint64_t u = 0;   // unsigned integers and bool
  int64_t i = 0;    // signed integers (also set for unsigned ones that fit)
  double f = 0;     // floats (also set for every integer type)
  std::string s;
  GgufValueType elem = GgufValueType::U8;  // arrays: the element type
  std::vector<GgufValue> items;            // arrays

  bool is_int() const;
  bool is_array_of(GgufValueType t) const { return type == GgufValueType::ARRAY && elem == t; }
  static GgufValue str(std::string v);
  static GgufValue u32(uint32_t v);
  static GgufValue i32(int32_t v);
  static GgufValue f32(float v);
  static GgufValue boolean(bool v);
  static GgufValue array(GgufValueType elem, std::vector<GgufValue> items);
};

struct GgufTensor {
  std::string name;
  std::vector<int64_t> ne;  // dims innermost first: ne[0] is the row length (columns)
  uint32_t type = 0;
  uint64_t offset = 0;      // within the data section
  const uint8_t* data = nullptr;
  size_t nbytes = 0;
  int64_t numel() const;
  GgmlType ggml() const { return GgmlType(type); }
};

class GgufFile {
 public:
  explicit GgufFile(const std::string& path);
  const std::string& path() const { return file_.path(); }
  uint32_t version() const { return version_; }
  uint32_t alignment() const { return alignment_; }
  const std::map<std::string, GgufValue>& metadata() const { return kv_; }
  const std::vector<GgufTensor>& tensors() const { return tensors_; }

  const GgufValue* find(const std::string& key) const;
  const GgufTensor* tensor(const std::string& name) const;
  // Typed getters: a present key of the wrong type is an error naming the file and key.
  std::optional<std::string> get_string(const std::string& key) const;
  std::optional<int64_t> get_int(const std::string& key) const;
  std::optional<double> get_float(const std::string& key) const;
  std::optional<bool> get_bool(const std::string& key) const;

 private:
  MappedFile file_;
  uint32_t version_ = 0, alignment_ = 32;
  std::map<std::string, GgufValue> kv_;
  std::vector<GgufTensor> tensors_;
  std::map<std::string, size_t> by_name_;
};

// Builds a GGUF v3 file in memory order: metadata in insertion order, tensors in order.
class GgufWriter {
 public:
  void add(const std::string& key, GgufValue v) { kv_.emplace_back(key, std::move(v)); }
  // ne innermost first; data must be exactly the type's size for ne.
  void add_tensor(const std::string& name, std::vector<int64_t> ne, GgmlType type, std::vector<uint8_t> data);
  void write(const std::string& path) const;

 private:
  struct T {
    std::string name;
    std::vector<int64_t> ne;
    GgmlType type;
    std::vector<uint8_t> data;
  };
  std::vector<std::pair<std::string, GgufValue>> kv_;
  std::vector<T> tensors_;
};

bool has_gguf_suffix(const std::string& path);

}  // namespace dflash
