#include "formats/json_file.h"

#include "util/error.h"
#include "util/mapped_file.h"

namespace dflash {

nlohmann::json read_json_file(const std::string& path) {
  if (!file_exists(path)) throw file_error(path, "missing file");
  try {
    return nlohmann::json::parse(read_text_file(path));
  } catch (const nlohmann::json::exception& e) {
    throw file_error(path, std::string("malformed JSON: ") + e.what());
  }
}

}  // namespace dflash
