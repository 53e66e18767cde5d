#include "util/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <new>
#include <sstream>

#include "util/error.h"

namespace dflash {

MappedFile::MappedFile(const std::string& path, bool populate) : path_(path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw file_error(path, std::string("cannot open: ") + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw file_error(path, "not a regular file");
  }
  size_ = static_cast<size_t>(st.st_size);
  if (size_ > 0) {
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE | (populate ? MAP_POPULATE : 0), fd, 0);
    if (p == MAP_FAILED) {
      ::close(fd);
      throw file_error(path, std::string("mmap failed: ") + std::strerror(errno));
    }
    data_ = static_cast<const uint8_t*>(p);
  }
  ::close(fd);
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
  if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
  data_ = nullptr;
  size_ = 0;
}

// The x86-64 and arm64 (4 KiB granule) huge-page size.
constexpr size_t kHugePage = size_t(2) << 20;

std::shared_ptr<uint8_t> alloc_pages(size_t bytes) {
  const size_t page = size_t(::sysconf(_SC_PAGESIZE));
  const size_t n = (std::max<size_t>(bytes, 1) + page - 1) / page * page;  // mmap takes no empty mapping
  // A decode pass streams every weight byte once; with 4 KiB pages each page costs a TLB
  // miss and the hardware prefetcher stops at every page edge. So a buffer of at least one
  // huge page starts on a huge-page boundary and asks for huge pages (transparent huge pages
  // are often set to "madvise"); its tail past the last whole huge page stays in small pages,
  // so no buffer takes more memory than it asks for.
  if (n >= kHugePage) {
    const size_t span = n + kHugePage - page;
    void* p = ::mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    const uintptr_t lo = reinterpret_cast<uintptr_t>(p);
    const uintptr_t a = (lo + kHugePage - 1) / kHugePage * kHugePage;
    if (a > lo) ::munmap(p, a - lo);
    if (lo + span > a + n) ::munmap(reinterpret_cast<void*>(a + n), lo + span - (a + n));
#ifdef MADV_HUGEPAGE
    ::madvise(reinterpret_cast<void*>(a), n / kHugePage * kHugePage, MADV_HUGEPAGE);  // a hint: may fail
#endif
    return std::shared_ptr<uint8_t>(reinterpret_cast<uint8_t*>(a), [n](uint8_t* q) { ::munmap(q, n); });
  }
  void* p = ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  return std::shared_ptr<uint8_t>(static_cast<uint8_t*>(p), [n](uint8_t* q) { ::munmap(q, n); });
}

void release_mapped_pages(const void* p, size_t n) {
  const uintptr_t page = uintptr_t(::sysconf(_SC_PAGESIZE));
  const uintptr_t b = (reinterpret_cast<uintptr_t>(p) + page - 1) / page * page;
  const uintptr_t e = (reinterpret_cast<uintptr_t>(p) + n) / page * page;
  if (e > b) ::madvise(reinterpret_cast<void*>(b), e - b, MADV_DONTNEED);
}

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
