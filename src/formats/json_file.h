#pragma once
#include <nlohmann/json.hpp>
#include <string>

namespace dflash {

// Parses a JSON file; a syntax error names the file and the position.
nlohmann::json read_json_file(const std::string& path);

}  // namespace dflash
