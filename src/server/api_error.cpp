#include "server/api_error.h"

namespace dflash::server {

using ojson = nlohmann::ordered_json;

ojson ApiError::body() const { return error_body(what(), type_, param_, code_); }

ojson error_body(const std::string& message, const std::string& type, const std::string& param, const std::string& code) {
  ojson e = {{"message", message}, {"type", type}};
  e["param"] = param.empty() ? ojson() : ojson(param);
  e["code"] = code.empty() ? ojson() : ojson(code);
  return {{"error", e}};
}

}  // namespace dflash::server
