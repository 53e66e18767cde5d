#pragma once
// Helpers the harnesses share: cutting one fuzz input into parts, and handing bytes to an
// API that only opens files by path.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

namespace fuzz {

inline std::string_view as_view(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// Cuts `in` at its first NUL byte: the part before goes to `head`, the rest (NUL dropped) stays
// in `in`. Without a NUL, everything goes to `head` and `in` becomes empty. Harnesses put JSON
// first: well-formed JSON never holds a raw NUL, so the part after it can be any bytes.
inline std::string_view take_until_nul(std::string_view& in) {
  const size_t at = in.find('\0');
  std::string_view head = in.substr(0, at);
  in = at == std::string_view::npos ? std::string_view() : in.substr(at + 1);
  return head;
}

// One file per process in /dev/shm (memory, not disk), rewritten for every input: for the
// readers that take a path (SafetensorsFile, GgufFile). The fuzz build opens it through
// fuzz/heap_mapped_file.cpp, so the bytes sit in an exactly sized heap block that ASan guards.
class ScratchFile {
 public:
  ScratchFile() {
    const char* dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    path_ = std::string(dir) + "/dflash-fuzz-" + std::to_string(getpid()) + ".bin";
  }
  ~ScratchFile() { std::remove(path_.c_str()); }
  const std::string& write(const uint8_t* data, size_t size) {
    FILE* f = std::fopen(path_.c_str(), "wb");
    if (!f || (size && std::fwrite(data, 1, size, f) != size) || std::fclose(f) != 0) {
      std::perror(path_.c_str());
      std::abort();  // the harness cannot work: not a finding in the code under test
    }
    return path_;
  }

 private:
  std::string path_;
};

}  // namespace fuzz
