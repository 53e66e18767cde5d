#pragma once
// safetensors: 8-byte little-endian header length, JSON header, raw little-endian data.
// Every offset is checked against the file before any byte is read.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "util/mapped_file.h"

namespace dflash {

enum class DType { F32, F16, BF16, Unsupported };

const char* dtype_name(DType t);
size_t dtype_size(DType t);

struct TensorView {
  std::string name;
  std::string file;       // which file it came from, for error messages
  std::string dtype_str;  // as written in the header ("BF16", "I64", ...)
  DType dtype = DType::Unsupported;
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;
  size_t nbytes = 0;
  int64_t numel() const;
};

class SafetensorsFile {
 public:
  explicit SafetensorsFile(const std::string& path);
  const std::map<std::string, TensorView>& tensors() const { return tensors_; }
  const std::string& path() const { return file_.path(); }

 private:
  MappedFile file_;
  std::map<std::string, TensorView> tensors_;
};

// All tensors of a model folder: model.safetensors, or the shards named by
// model.safetensors.index.json.
class TensorStore {
 public:
  static TensorStore open_folder(const std::string& dir);
  static TensorStore open_files(const std::vector<std::string>& paths);

  const TensorView* find(const std::string& name) const;
  std::vector<std::string> names() const;
  const std::string& origin() const { return origin_; }

 private:
  std::string origin_;
  std::vector<std::shared_ptr<SafetensorsFile>> files_;
  std::map<std::string, const TensorView*> index_;
};

}  // namespace dflash
