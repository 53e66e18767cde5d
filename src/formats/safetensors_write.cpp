#include "formats/safetensors_write.h"

#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "util/error.h"

namespace dflash {

void write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors, const RowWriter& fill) {
  nlohmann::ordered_json header;
  header["__metadata__"] = {{"format", "pt"}};
  size_t offset = 0;
  std::vector<std::pair<int64_t, size_t>> rows;  // (rows, bytes per row) per tensor
  for (const TensorToWrite& t : tensors) {
    if (t.shape.empty() || dtype_size(t.dtype) == 0) throw Error("safetensors writer: tensor '" + t.name + "' has no shape or dtype");
    int64_t n_rows = 1;
    for (size_t i = 0; i + 1 < t.shape.size(); ++i) n_rows *= t.shape[i];
    const size_t row_bytes = size_t(t.shape.back()) * dtype_size(t.dtype);
    const size_t bytes = size_t(n_rows) * row_bytes;
    header[t.name] = {{"dtype", dtype_name(t.dtype)}, {"shape", t.shape}, {"data_offsets", {offset, offset + bytes}}};
    rows.emplace_back(n_rows, row_bytes);
    offset += bytes;
  }
  std::string h = header.dump();
  h.append((8 - h.size() % 8) % 8, ' ');  // the data starts 8-byte aligned, as the reference pads it
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "wb"), &std::fclose);
  if (!f) throw file_error(path, "cannot open for writing");
  uint8_t len[8];
  for (int i = 0; i < 8; ++i) len[i] = uint8_t(uint64_t(h.size()) >> (8 * i));
  bool ok = std::fwrite(len, 1, 8, f.get()) == 8 && std::fwrite(h.data(), 1, h.size(), f.get()) == h.size();
  std::vector<uint8_t> buf;
  for (size_t i = 0; i < tensors.size() && ok; ++i) {
    buf.resize(rows[i].second);
    for (int64_t r = 0; r < rows[i].first && ok; ++r) {
      fill(i, r, buf.data());
      ok = std::fwrite(buf.data(), 1, buf.size(), f.get()) == buf.size();
    }
  }
  if (!ok || std::fflush(f.get()) != 0) throw file_error(path, "short write");
}

}  // namespace dflash
