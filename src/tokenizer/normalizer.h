#pragma once
// tokenizer.json "normalizer": null, NFC, or a Sequence of supported normalizers.
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace dflash::tok {

class Normalizer {
 public:
  // Throws file_error(origin, ...) for a normalizer it does not implement.
  static Normalizer from_json(const nlohmann::json& j, const std::string& origin);

  bool empty() const { return steps_.empty(); }
  // Returns the normalized text (valid UTF-8 in, valid UTF-8 out).
  std::string apply(std::string_view text) const;

 private:
  enum class Step { Nfc };
  static void collect(const nlohmann::json& j, const std::string& origin, std::vector<Step>& out);
  std::vector<Step> steps_;
};

// Canonical composition. Exposed for tests.
std::string nfc(std::string_view text);

}  // namespace dflash::tok
