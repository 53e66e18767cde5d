#pragma once
// Streams tokenizer.json once: the vocab and merges (hundreds of thousands of entries) go
// straight into flat vectors, everything else into an ordinary JSON tree. Building a full
// nlohmann tree for a 10 MB vocab took longer than all the rest of loading.
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace dflash::tok {

struct TokenizerJsonDoc {
  nlohmann::json tree;  // the file without model.vocab and model.merges (left as empty values)
  bool has_vocab = false, has_merges = false;
  std::vector<std::pair<std::string, int64_t>> vocab;       // token text, id
  std::vector<std::pair<std::string, std::string>> merges;  // left, right, in rank order
};

// Throws file_error(origin, ...) on malformed JSON or a malformed vocab / merge entry.
TokenizerJsonDoc read_tokenizer_json(std::string_view text, const std::string& origin);

}  // namespace dflash::tok
