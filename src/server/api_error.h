#pragma once
// Failures a client caused (or must be told about), carried to the HTTP layer with the status
// and OpenAI's error fields, so every endpoint answers in the one shape clients parse.
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

namespace dflash::server {

class ApiError : public std::runtime_error {
 public:
  ApiError(int status, std::string message, std::string type = "invalid_request_error", std::string param = "",
           std::string code = "")
      : std::runtime_error(message), status_(status), type_(std::move(type)), param_(std::move(param)),
        code_(std::move(code)) {}

  int status() const { return status_; }
  nlohmann::ordered_json body() const;

 private:
  int status_;
  std::string type_, param_, code_;
};

// {"error": {"message", "type", "param", "code"}}; empty param/code become null.
nlohmann::ordered_json error_body(const std::string& message, const std::string& type, const std::string& param,
                                  const std::string& code);

inline ApiError bad_param(const std::string& param, const std::string& message) {
  return ApiError(400, message, "invalid_request_error", param, "invalid_value");
}

}  // namespace dflash::server
