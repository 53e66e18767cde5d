#include "server/think_cap.h"

#include <algorithm>

namespace dflash::server {

int ThinkCap::budget(int used) const {
  const int left = std::max(0, max_ - used);
  return armed_ ? std::min(left, std::max(0, cap_ - used)) : left;
}

std::vector<int32_t> think_close_tokens(const Tokenizer& tok) { return tok.encode("</think>\n\n"); }

}  // namespace dflash::server
