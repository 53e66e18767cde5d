#pragma once
// One exception type for every user-facing failure: the CLI prints what() on one line and exits 1.
#include <stdexcept>
#include <string>

namespace dflash {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& msg) : std::runtime_error(msg) {}
};

// Errors about a file always name it first, so a user with many shards knows which one is bad.
inline Error file_error(const std::string& path, const std::string& what) {
  return Error(path + ": " + what);
}

}  // namespace dflash
