// The fuzz build's stand-in for src/util/mapped_file.cpp (same header, same behaviour for the
// readers): the file is read into a heap block of exactly its size instead of being mmap'ed.
// AddressSanitizer does not watch mmap'ed pages, so a parser reading a few bytes past the end of
// a mapped file would go unnoticed (the rest of the last page is readable zeros); past the end of
// a heap block it is a heap-buffer-overflow report.
#include <sys/stat.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <new>
#include <sstream>

#include "util/error.h"
#include "util/mapped_file.h"

namespace dflash {

MappedFile::MappedFile(const std::string& path, bool /*populate*/) : path_(path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw file_error(path, std::string("cannot open: ") + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) throw file_error(path, "not a regular file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw file_error(path, "cannot open");
  size_ = static_cast<size_t>(st.st_size);
  if (size_ > 0) {
    auto* p = static_cast<uint8_t*>(std::malloc(size_));
    if (!p) throw std::bad_alloc();
    if (!in.read(reinterpret_cast<char*>(p), static_cast<std::streamsize>(size_))) {
      std::free(p);
      throw file_error(path, "short read");
    }
    data_ = p;
  }
}

MappedFile::~MappedFile() { release(); }

MappedFile::MappedFile(MappedFile&& o) noexcept { *this = std::move(o); }

MappedFile& MappedFile::operator=(MappedFile&& o) noexcept {
  if (this != &o) {
    release();
    path_ = std::move(o.path_);
    data_ = o.data_;
    size_ = o.size_;
    o.data_ = nullptr;
    o.size_ = 0;
  }
  return *this;
}

void MappedFile::release() {
  std::free(const_cast<uint8_t*>(data_));
  data_ = nullptr;
  size_ = 0;
}

std::shared_ptr<uint8_t> alloc_pages(size_t bytes) {
  auto* p = static_cast<uint8_t*>(std::calloc(bytes ? bytes : 1, 1));
  if (!p) throw std::bad_alloc();
  return std::shared_ptr<uint8_t>(p, [](uint8_t* q) { std::free(q); });
}

void release_mapped_pages(const void*, size_t) {}

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw file_error(path, "cannot open");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool file_exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

}  // namespace dflash
