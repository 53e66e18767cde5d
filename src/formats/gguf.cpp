#include "formats/gguf.h"

#include <cstring>
#include <fstream>

#include "util/error.h"

namespace dflash {

namespace {

// Limits far above any real model, so that a corrupt count fails here rather than in an
// allocation of terabytes.
constexpr uint64_t kMaxString = uint64_t(1) << 30;
constexpr uint64_t kMaxDim = uint64_t(1) << 40;
constexpr uint32_t kMaxDims = 4;  // GGML_MAX_DIMS
constexpr int kMaxArrayDepth = 4;

struct TypeInfo {
  uint32_t id;
  const char* name;
  int64_t block, bytes;
};
constexpr TypeInfo kTypes[] = {
    {0, "F32", 1, 4},       {1, "F16", 1, 2},       {2, "Q4_0", 32, 18},   {3, "Q4_1", 32, 20},
    {6, "Q5_0", 32, 22},    {7, "Q5_1", 32, 24},    {8, "Q8_0", 32, 34},   {9, "Q8_1", 32, 36},
    {10, "Q2_K", 256, 84},  {11, "Q3_K", 256, 110}, {12, "Q4_K", 256, 144}, {13, "Q5_K", 256, 176},
    {14, "Q6_K", 256, 210}, {15, "Q8_K", 256, 292}, {24, "I8", 1, 1},      {25, "I16", 1, 2},
    {26, "I32", 1, 4},      {27, "I64", 1, 8},      {28, "F64", 1, 8},     {30, "BF16", 1, 2},
};

const char* value_type_name(GgufValueType t) {
  static const char* names[] = {"u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64"};
  return uint32_t(t) < 13 ? names[uint32_t(t)] : "unknown";
}

class Reader {
 public:
  Reader(const uint8_t* p, size_t n, const std::string& path) : p_(p), n_(n), path_(path) {}
  size_t pos() const { return pos_; }
  size_t left() const { return n_ - pos_; }

  void need(uint64_t k, const std::string& what) const {
    if (k > left())
      throw file_error(path_, "truncated: " + what + " needs " + std::to_string(k) + " bytes at offset " +
                                  std::to_string(pos_) + ", but the file has " + std::to_string(left()) + " left");
  }
  template <class T>
  T get(const std::string& what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, p_ + pos_, sizeof(T));  // little-endian hosts only, like the safetensors reader
    pos_ += sizeof(T);
    return v;
  }
  std::string str(const std::string& what) {
    const uint64_t len = get<uint64_t>(what + " length");
    if (len > kMaxString)
      throw file_error(path_, "absurd string length " + std::to_string(len) + " in " + what);
    need(len, what);
    std::string s(reinterpret_cast<const char*>(p_ + pos_), size_t(len));
    pos_ += size_t(len);
    return s;
  }

 private:
  const uint8_t* p_;
  size_t n_, pos_ = 0;
  const std::string& path_;
};

size_t min_value_bytes(GgufValueType t) {
  switch (t) {
    case GgufValueType::U8: case GgufValueType::I8: case GgufValueType::BOOL: return 1;
    case GgufValueType::U16: case GgufValueType::I16: return 2;
    case GgufValueType::U32: case GgufValueType::I32: case GgufValueType::F32: return 4;
    case GgufValueType::U64: case GgufValueType::I64: case GgufValueType::F64: case GgufValueType::STRING: return 8;
    case GgufValueType::ARRAY: return 12;
  }
  return 1;
}

GgufValue read_value(Reader& r, uint32_t type, const std::string& key) {
  GgufValue v;
  v.type = GgufValueType(type);
  const std::string what = "value of '" + key + "'";
  switch (v.type) {
    case GgufValueType::U8: v.u = r.get<uint8_t>(what); break;
    case GgufValueType::I8: v.i = r.get<int8_t>(what); break;
    case GgufValueType::U16: v.u = r.get<uint16_t>(what); break;
    case GgufValueType::I16: v.i = r.get<int16_t>(what); break;
    case GgufValueType::U32: v.u = r.get<uint32_t>(what); break;
    case GgufValueType::I32: v.i = r.get<int32_t>(what); break;
    case GgufValueType::U64: v.u = r.get<uint64_t>(what); break;
    case GgufValueType::I64: v.i = r.get<int64_t>(what); break;
    case GgufValueType::F32: v.f = r.get<float>(what); break;
    case GgufValueType::F64: v.f = r.get<double>(what); break;
    case GgufValueType::BOOL: v.u = r.get<uint8_t>(what) != 0; break;
    case GgufValueType::STRING: v.s = r.str(what); break;
    case GgufValueType::ARRAY: break;
  }
  switch (v.type) {
    case GgufValueType::U8: case GgufValueType::U16: case GgufValueType::U32: case GgufValueType::U64:
      v.i = int64_t(v.u);
      v.f = double(v.u);
      break;
    case GgufValueType::I8: case GgufValueType::I16: case GgufValueType::I32: case GgufValueType::I64:
      v.u = uint64_t(v.i);
      v.f = double(v.i);
      break;
    default: break;
  }
  return v;
}

}  // namespace

const char* ggml_type_name(GgmlType t) {
  for (const auto& ti : kTypes)
    if (ti.id == uint32_t(t)) return ti.name;
  return "unknown";
}

bool ggml_type_layout(uint32_t type, int64_t& block, int64_t& block_bytes) {
  for (const auto& ti : kTypes)
    if (ti.id == type) {
      block = ti.block;
      block_bytes = ti.bytes;
      return true;
    }
  return false;
}

bool GgufValue::is_int() const {
  switch (type) {
    case GgufValueType::U8: case GgufValueType::I8: case GgufValueType::U16: case GgufValueType::I16:
    case GgufValueType::U32: case GgufValueType::I32: case GgufValueType::U64: case GgufValueType::I64: return true;
    default: return false;
  }
}

GgufValue GgufValue::str(std::string v) {
  GgufValue x;
  x.type = GgufValueType::STRING;
  x.s = std::move(v);
  return x;
}
GgufValue GgufValue::u32(uint32_t v) {
  GgufValue x;
  x.type = GgufValueType::U32;
  x.u = v, x.i = v, x.f = v;
  return x;
}
GgufValue GgufValue::i32(int32_t v) {
  GgufValue x;
  x.type = GgufValueType::I32;
  x.i = v, x.u = uint64_t(int64_t(v)), x.f = v;
  return x;
}
GgufValue GgufValue::f32(float v) {
  GgufValue x;
  x.type = GgufValueType::F32;
  x.f = v;
  return x;
}
GgufValue GgufValue::boolean(bool v) {
  GgufValue x;
  x.type = GgufValueType::BOOL;
  x.u = v;
  return x;
}
GgufValue GgufValue::array(GgufValueType elem, std::vector<GgufValue> items) {
  GgufValue x;
  x.type = GgufValueType::ARRAY;
  x.elem = elem;
  x.items = std::move(items);
  return x;
}

int64_t GgufTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : ne) n *= d;
  return n;
}

bool has_gguf_suffix(const std::string& path) {
  return path.size() >= 5 && path.compare(path.size() - 5, 5, ".gguf") == 0;
}

static GgufValue read_any(Reader& r, uint32_t type, const std::string& key, int depth, const std::string& path) {
  if (type > 12)
    throw file_error(path, "metadata key '" + key + "' has unknown value type " + std::to_string(type));
  if (GgufValueType(type) != GgufValueType::ARRAY) return read_value(r, type, key);
  if (depth >= kMaxArrayDepth) throw file_error(path, "metadata key '" + key + "': arrays nested too deeply");
  GgufValue v;
  v.type = GgufValueType::ARRAY;
  const uint32_t et = r.get<uint32_t>("array type of '" + key + "'");
  if (et > 12)
    throw file_error(path, "metadata key '" + key + "' is an array of unknown value type " + std::to_string(et));
  v.elem = GgufValueType(et);
  const uint64_t count = r.get<uint64_t>("array length of '" + key + "'");
  if (count > r.left() / min_value_bytes(v.elem))
    throw file_error(path, "absurd array length " + std::to_string(count) + " for metadata key '" + key +
                               "' (the file has " + std::to_string(r.left()) + " bytes left)");
  v.items.reserve(size_t(count));
  for (uint64_t k = 0; k < count; ++k) v.items.push_back(read_any(r, et, key, depth + 1, path));
  return v;
}

GgufFile::GgufFile(const std::string& path) : file_(path) {
  Reader r(file_.data(), file_.size(), path);
  if (file_.size() < 4) throw file_error(path, "truncated: too short for a GGUF header (" + std::to_string(file_.size()) + " bytes)");
  if (std::memcmp(file_.data(), "GGUF", 4) != 0) throw file_error(path, "bad magic: not a GGUF file");
  r.get<uint32_t>("magic");
  version_ = r.get<uint32_t>("version");
  if (version_ != 2 && version_ != 3)
    throw file_error(path, "unsupported GGUF version " + std::to_string(version_) + " (supported: 2, 3)");
  const uint64_t n_tensors = r.get<uint64_t>("tensor count");
  const uint64_t n_kv = r.get<uint64_t>("metadata count");
  // Each entry takes at least this many bytes, so a count beyond left()/min is a lie.
  if (n_kv > r.left() / 13)
    throw file_error(path, "absurd metadata count " + std::to_string(n_kv) + " for a file of " + std::to_string(file_.size()) + " bytes");
  if (n_tensors > r.left() / 28)
    throw file_error(path, "absurd tensor count " + std::to_string(n_tensors) + " for a file of " + std::to_string(file_.size()) + " bytes");
  for (uint64_t k = 0; k < n_kv; ++k) {
    std::string key = r.str("metadata key");
    const uint32_t type = r.get<uint32_t>("value type of '" + key + "'");
    GgufValue v = read_any(r, type, key, 0, path);
    if (kv_.count(key)) throw file_error(path, "metadata key '" + key + "' appears twice");
    kv_.emplace(std::move(key), std::move(v));
  }
  if (const GgufValue* a = find("general.alignment")) {
    if (!a->is_int() || a->u == 0 || a->u > (1u << 20) || (a->u & (a->u - 1)) != 0)
      throw file_error(path, "general.alignment must be a power of two (got " + std::to_string(a->i) + ")");
    alignment_ = uint32_t(a->u);
  }
  tensors_.reserve(size_t(n_tensors));
  for (uint64_t k = 0; k < n_tensors; ++k) {
    GgufTensor t;
    t.name = r.str("tensor name");
    const uint32_t nd = r.get<uint32_t>("dimension count of tensor '" + t.name + "'");
    if (nd == 0 || nd > kMaxDims)
      throw file_error(path, "tensor '" + t.name + "' has " + std::to_string(nd) + " dimensions (1.." + std::to_string(kMaxDims) + " allowed)");
    uint64_t numel = 1;
    for (uint32_t d = 0; d < nd; ++d) {
      const uint64_t n = r.get<uint64_t>("dimensions of tensor '" + t.name + "'");
      if (n == 0 || n > kMaxDim)
        throw file_error(path, "tensor '" + t.name + "' has an absurd dimension " + std::to_string(n));
      if (numel > kMaxDim / n) throw file_error(path, "tensor '" + t.name + "': element count overflows");
      numel *= n;
      t.ne.push_back(int64_t(n));
    }
    t.type = r.get<uint32_t>("type of tensor '" + t.name + "'");
    t.offset = r.get<uint64_t>("offset of tensor '" + t.name + "'");
    int64_t block = 0, bbytes = 0;
    if (!ggml_type_layout(t.type, block, bbytes))
      throw file_error(path, "tensor '" + t.name + "' has unknown tensor type " + std::to_string(t.type));
    if (t.ne[0] % block != 0)
      throw file_error(path, "tensor '" + t.name + "': row length " + std::to_string(t.ne[0]) +
                                 " is not a multiple of the " + ggml_type_name(t.ggml()) + " block (" + std::to_string(block) + ")");
    t.nbytes = size_t(numel / uint64_t(block) * uint64_t(bbytes));  // numel <= 2^40: no overflow
    if (by_name_.count(t.name)) throw file_error(path, "tensor '" + t.name + "' appears twice");
    by_name_[t.name] = tensors_.size();
    tensors_.push_back(std::move(t));
  }
  const size_t data_start = (r.pos() + alignment_ - 1) / alignment_ * alignment_;
  if (data_start > file_.size() && !tensors_.empty())
    throw file_error(path, "truncated: the data section would start at " + std::to_string(data_start) +
                               ", past the end of the file (" + std::to_string(file_.size()) + " bytes)");
  const size_t data_size = data_start <= file_.size() ? file_.size() - data_start : 0;
  for (auto& t : tensors_) {
    if (t.offset % alignment_ != 0)
      throw file_error(path, "tensor '" + t.name + "' data offset " + std::to_string(t.offset) +
                                 " is not a multiple of the alignment " + std::to_string(alignment_));
    if (t.offset > data_size || t.nbytes > data_size - t.offset)
      throw file_error(path, "truncated: tensor '" + t.name + "' data (offset " + std::to_string(t.offset) + ", " +
                                 std::to_string(t.nbytes) + " bytes) runs past the end of the file (data section: " +
                                 std::to_string(data_size) + " bytes)");
    t.data = file_.data() + data_start + t.offset;
  }
}

const GgufValue* GgufFile::find(const std::string& key) const {
  auto it = kv_.find(key);
  return it == kv_.end() ? nullptr : &it->second;
}

const GgufTensor* GgufFile::tensor(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : &tensors_[it->second];
}

std::optional<std::string> GgufFile::get_string(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  if (v->type != GgufValueType::STRING)
    throw file_error(path(), "metadata key '" + key + "' must be a string, not " + value_type_name(v->type));
  return v->s;
}

std::optional<int64_t> GgufFile::get_int(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  if (!v->is_int())
    throw file_error(path(), "metadata key '" + key + "' must be an integer, not " + value_type_name(v->type));
  if (v->type == GgufValueType::U64 && v->u > uint64_t(INT64_MAX))
    throw file_error(path(), "metadata key '" + key + "' is out of range");
  return v->i;
}

std::optional<double> GgufFile::get_float(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  if (v->type != GgufValueType::F32 && v->type != GgufValueType::F64 && !v->is_int())
    throw file_error(path(), "metadata key '" + key + "' must be a number, not " + value_type_name(v->type));
  return v->f;
}

std::optional<bool> GgufFile::get_bool(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  if (v->type != GgufValueType::BOOL)
    throw file_error(path(), "metadata key '" + key + "' must be a bool, not " + value_type_name(v->type));
  return v->u != 0;
}

// --- writer ----------------------------------------------------------------------------

void GgufWriter::add_tensor(const std::string& name, std::vector<int64_t> ne, GgmlType type, std::vector<uint8_t> data) {
  int64_t block = 0, bb = 0;
  if (!ggml_type_layout(uint32_t(type), block, bb)) throw Error("GGUF writer: unknown tensor type");
  int64_t numel = 1;
  for (int64_t d : ne) numel *= d;
  if (ne.empty() || ne[0] % block != 0 || size_t(numel / block * bb) != data.size())
    throw Error("GGUF writer: tensor '" + name + "' data does not match its shape and type");
  tensors_.push_back({name, std::move(ne), type, std::move(data)});
}

namespace {

struct Out {
  std::string buf;
  template <class T>
  void put(T v) {
    buf.append(reinterpret_cast<const char*>(&v), sizeof(T));
  }
  void str(const std::string& s) {
    put<uint64_t>(s.size());
    buf += s;
  }
  void pad(size_t align) {
    while (buf.size() % align) buf.push_back('\0');
  }
  void value(const GgufValue& v) {
    switch (v.type) {
      case GgufValueType::U8: put<uint8_t>(uint8_t(v.u)); break;
      case GgufValueType::I8: put<int8_t>(int8_t(v.i)); break;
      case GgufValueType::U16: put<uint16_t>(uint16_t(v.u)); break;
      case GgufValueType::I16: put<int16_t>(int16_t(v.i)); break;
      case GgufValueType::U32: put<uint32_t>(uint32_t(v.u)); break;
      case GgufValueType::I32: put<int32_t>(int32_t(v.i)); break;
      case GgufValueType::U64: put<uint64_t>(v.u); break;
      case GgufValueType::I64: put<int64_t>(v.i); break;
      case GgufValueType::F32: put<float>(float(v.f)); break;
      case GgufValueType::F64: put<double>(v.f); break;
      case GgufValueType::BOOL: put<uint8_t>(v.u ? 1 : 0); break;
      case GgufValueType::STRING: str(v.s); break;
      case GgufValueType::ARRAY:
        put<uint32_t>(uint32_t(v.elem));
        put<uint64_t>(v.items.size());
        for (const auto& x : v.items) value(x);
        break;
    }
  }
};

}  // namespace

void GgufWriter::write(const std::string& path) const {
  constexpr size_t kAlign = 32;
  Out o;
  o.buf = "GGUF";
  o.put<uint32_t>(3);
  o.put<uint64_t>(tensors_.size());
  o.put<uint64_t>(kv_.size());
  for (const auto& [k, v] : kv_) {
    o.str(k);
    o.put<uint32_t>(uint32_t(v.type));
    o.value(v);
  }
  uint64_t off = 0;
  for (const auto& t : tensors_) {
    o.str(t.name);
    o.put<uint32_t>(uint32_t(t.ne.size()));
    for (int64_t d : t.ne) o.put<uint64_t>(uint64_t(d));
    o.put<uint32_t>(uint32_t(t.type));
    o.put<uint64_t>(off);
    off += (t.data.size() + kAlign - 1) / kAlign * kAlign;
  }
  o.pad(kAlign);
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) throw file_error(path, "cannot open for writing");
  f.write(o.buf.data(), std::streamsize(o.buf.size()));
  static const char zeros[kAlign] = {};
  for (const auto& t : tensors_) {
    f.write(reinterpret_cast<const char*>(t.data.data()), std::streamsize(t.data.size()));
    const size_t pad = (kAlign - t.data.size() % kAlign) % kAlign;
    f.write(zeros, std::streamsize(pad));
  }
  if (!f) throw file_error(path, "write failed");
}

}  // namespace dflash
