#pragma once
// Stop sequences over a text stream that arrives in arbitrary pieces (tokens, UTF-8 pieces):
// text that could still become the start of a stop string is held back, so a stop string is
// never emitted, even in part, however the tokens split it.
#include <string>
#include <vector>

namespace dflash::server {

class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops);

  // Returns the text that is now safe to emit. After a match, returns the text before the
  // stop string and stopped() becomes true; later pushes return nothing.
  std::string push(const std::string& piece);
  // End of stream: whatever was held back (it can no longer become a stop string).
  std::string flush();
  bool stopped() const { return stopped_; }
  const std::string& matched() const { return matched_; }

 private:
  std::vector<std::string> stops_;
  std::string held_;
  std::string matched_;
  bool stopped_ = false;
};

}  // namespace dflash::server
