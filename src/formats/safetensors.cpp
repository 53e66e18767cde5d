#include "formats/safetensors.h"

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>

#include "util/error.h"

namespace dflash {

const char* dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "F32";
    case DType::F16: return "F16";
    case DType::BF16: return "BF16";
    default: return "unsupported";
  }
}

size_t dtype_size(DType t) {
  switch (t) {
    case DType::F32: return 4;
    case DType::F16:
    case DType::BF16: return 2;
    default: return 0;
  }
}

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

static DType parse_dtype(const std::string& s) {
  if (s == "F32") return DType::F32;
  if (s == "F16") return DType::F16;
  if (s == "BF16") return DType::BF16;
  return DType::Unsupported;
}

// Sizes of dtypes we do not compute with, so their byte ranges can still be validated.
static size_t any_dtype_size(const std::string& s) {
  static const std::map<std::string, size_t> sizes = {
      {"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"I64", 8}, {"I32", 4}, {"I16", 2},
      {"I8", 1},  {"U8", 1},  {"BOOL", 1}, {"F8_E4M3", 1}, {"F8_E5M2", 1}, {"U16", 2},
      {"U32", 4}, {"U64", 8}};
  auto it = sizes.find(s);
  return it == sizes.end() ? 0 : it->second;
}

SafetensorsFile::SafetensorsFile(const std::string& path) : file_(path) {
  const size_t size = file_.size();
  if (size < 8) throw file_error(path, "truncated: file is shorter than the 8-byte header length");
  uint64_t hlen = 0;
  std::memcpy(&hlen, file_.data(), 8);  // little-endian hosts only (x86-64, ARM64)
  if (hlen > size - 8)
    throw file_error(path, "truncated: header length " + std::to_string(hlen) +
                               " exceeds the file size " + std::to_string(size));
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(file_.data() + 8, file_.data() + 8 + hlen);
  } catch (const std::exception& e) {
    throw file_error(path, std::string("invalid safetensors header JSON: ") + e.what());
  }
  if (!header.is_object()) throw file_error(path, "invalid safetensors header: not a JSON object");
  const uint8_t* base = file_.data() + 8 + hlen;
  const size_t data_size = size - 8 - hlen;

  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (auto& [name, info] : header.items()) {
    if (name == "__metadata__") continue;
    try {
      TensorView t;
      t.name = name;
      t.file = path;
      t.dtype_str = info.at("dtype").get<std::string>();
      t.dtype = parse_dtype(t.dtype_str);
      // Integers only: a number past 2^64 parses as a double, and converting that to an integer
      // type is undefined (the fuzzer's 9.2e20 in a shape).
      // (info and name passed in: clang 14, which builds the fuzzers, cannot capture a binding)
      auto integers = [&path](const nlohmann::json& entry, const std::string& name, const char* key) {
        const auto& a = entry.at(key);
        if (!a.is_array()) throw file_error(path, "tensor '" + name + "': " + key + " is not a list");
        std::vector<uint64_t> v;
        for (const auto& x : a) {
          if (!x.is_number_unsigned())
            throw file_error(path, "tensor '" + name + "': " + key + " holds " + x.dump() +
                                       ", not a non-negative integer below 2^64");
          v.push_back(x.get<uint64_t>());
        }
        return v;
      };
      for (uint64_t d : integers(info, name, "shape")) {
        if (d > (uint64_t(1) << 40)) throw file_error(path, "tensor '" + name + "': absurd shape");
        t.shape.push_back(int64_t(d));
      }
      auto off = integers(info, name, "data_offsets");
      if (off.size() != 2 || off[0] > off[1])
        throw file_error(path, "tensor '" + name + "': bad data_offsets");
      if (off[1] > data_size)
        throw file_error(path, "truncated: tensor '" + name + "' data offset " +
                                   std::to_string(off[1]) + " is past the end of the data (" +
                                   std::to_string(data_size) + " bytes)");
      // The element count and byte size must fit 64 bits before they are compared with the
      // byte range: [2^32, 2^32] multiplies to 0 in 64-bit arithmetic and matched an empty one.
      const size_t esize = any_dtype_size(t.dtype_str);
      if (esize == 0)
        throw file_error(path, "tensor '" + name + "': unknown dtype '" + t.dtype_str + "'");
      uint64_t bytes = esize;
      for (int64_t d : t.shape) {
        if (d < 0 || d > (int64_t(1) << 40)) throw file_error(path, "tensor '" + name + "': absurd shape");
        if (d != 0 && bytes > (uint64_t(1) << 62) / uint64_t(d))
          throw file_error(path, "tensor '" + name + "': shape has more elements than any file can hold");
        bytes *= uint64_t(d);
      }
      if (bytes != off[1] - off[0])
        throw file_error(path, "tensor '" + name + "': byte range " + std::to_string(off[1] - off[0]) +
                                   " does not match shape and dtype (" +
                                   std::to_string(bytes) + " bytes)");
      t.data = base + off[0];
      t.nbytes = off[1] - off[0];
      ranges.emplace_back(off[0], off[1]);
      tensors_.emplace(name, std::move(t));
    } catch (const nlohmann::json::exception& e) {
      throw file_error(path, "tensor '" + name + "': malformed header entry: " + e.what());
    }
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i)
    if (ranges[i].first < ranges[i - 1].second)
      throw file_error(path, "tensor data offsets overlap");
}

TensorStore TensorStore::open_files(const std::vector<std::string>& paths) {
  TensorStore s;
  s.origin_ = paths.empty() ? "" : paths.front();
  for (const auto& p : paths) {
    auto f = std::make_shared<SafetensorsFile>(p);
    for (const auto& [name, t] : f->tensors()) {
      if (s.index_.count(name)) throw file_error(p, "tensor '" + name + "' appears in two files");
      s.index_[name] = &t;
    }
    s.files_.push_back(std::move(f));
  }
  return s;
}

TensorStore TensorStore::open_folder(const std::string& dir) {
  const std::string single = dir + "/model.safetensors";
  const std::string index = dir + "/model.safetensors.index.json";
  if (file_exists(index)) {
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(read_text_file(index));
    } catch (const nlohmann::json::exception& e) {
      throw file_error(index, std::string("malformed JSON: ") + e.what());
    }
    if (!j.contains("weight_map") || !j["weight_map"].is_object())
      throw file_error(index, "missing 'weight_map'");
    std::vector<std::string> shards;
    for (auto& [name, file] : j["weight_map"].items()) {
      if (!file.is_string()) throw file_error(index, "weight_map entry '" + name + "' is not a file name");
      std::string f = file.get<std::string>();
      if (f.find('/') != std::string::npos) throw file_error(index, "shard name '" + f + "' must be a plain file name");
      if (std::find(shards.begin(), shards.end(), f) == shards.end()) shards.push_back(f);
    }
    std::vector<std::string> paths;
    for (const auto& f : shards) {
      std::string p = dir + "/" + f;
      if (!file_exists(p)) throw file_error(index, "names a missing shard '" + f + "'");
      paths.push_back(p);
    }
    TensorStore s = open_files(paths);
    s.origin_ = index;
    for (auto& [name, file] : j["weight_map"].items())
      if (!s.index_.count(name))
        throw file_error(dir + "/" + file.get<std::string>(), "missing tensor '" + name + "' listed in the index");
    return s;
  }
  if (file_exists(single)) return open_files({single});
  throw file_error(dir, "missing model.safetensors (and no model.safetensors.index.json)");
}

const TensorView* TensorStore::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : it->second;
}

std::vector<std::string> TensorStore::names() const {
  std::vector<std::string> out;
  for (auto& [n, _] : index_) out.push_back(n);
  return out;
}

}  // namespace dflash
