#pragma once
// Read-only memory map of a whole file; weights stay in the page cache and load in O(1).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace dflash {

class MappedFile {
 public:
  MappedFile() = default;
  // populate=true reads every page now (benchmarks must not time page faults).
  explicit MappedFile(const std::string& path, bool populate = false);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  MappedFile(MappedFile&& o) noexcept;
  MappedFile& operator=(MappedFile&& o) noexcept;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  void release();
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

// Zero-filled anonymous pages (page-aligned), returned to the OS when the last owner lets go:
// for large buffers made at load (packed weights), which the heap would keep after a model
// is freed. Throws std::bad_alloc when memory runs out.
std::shared_ptr<uint8_t> alloc_pages(size_t bytes);

// Drops the whole pages inside [p, p + n) of a read-only file mapping from this process's
// memory (they read back from the file if touched again): for data copied out at load.
void release_mapped_pages(const void* p, size_t n);

std::string read_text_file(const std::string& path);
bool file_exists(const std::string& path);

}  // namespace dflash
