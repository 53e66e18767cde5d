#pragma once
// tokenizer.json "pre_tokenizer": Split steps (regex or literal, any behavior, invert) followed by
// ByteLevel (optional prefix space, optional GPT-2 regex). The result is a list of words in raw
// bytes; the ByteLevel character mapping itself is folded into the BPE model.
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "tokenizer/regex.h"

namespace dflash::tok {

enum class SplitBehavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };

// One Split pre-tokenizer. Exposed for tests.
class SplitStep {
 public:
  SplitStep(std::unique_ptr<Regex> regex, SplitBehavior behavior, bool invert)
      : regex_(std::move(regex)), behavior_(behavior), invert_(invert) {}
  SplitStep(std::string literal, SplitBehavior behavior, bool invert)
      : literal_(std::move(literal)), behavior_(behavior), invert_(invert) {}
  // Calls emit for each non-empty piece of text, in order, as soon as it is known.
  void split(std::string_view text, const std::function<void(std::string_view)>& emit) const;

 private:
  std::unique_ptr<Regex> regex_;  // null: literal_ is the pattern
  std::string literal_;
  SplitBehavior behavior_;
  bool invert_;
};

class PreTokenizer {
 public:
  // Throws file_error(origin, ...) for anything but Split* then ByteLevel.
  static PreTokenizer from_json(const nlohmann::json& j, const std::string& origin);

  // Calls emit(word) for every word of text, in order.
  void split(std::string_view text, const std::function<void(std::string_view)>& emit) const;

 private:
  void add_json(const nlohmann::json& j, const std::string& origin);
  void run(size_t step, std::string_view piece,
           const std::function<void(std::string_view)>& emit) const;

  struct Step {
    std::unique_ptr<SplitStep> split;  // null: ByteLevel's prefix-space step
  };
  std::vector<Step> steps_;
  bool saw_byte_level_ = false;
};

}  // namespace dflash::tok
