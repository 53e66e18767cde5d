#pragma once
// One line per request on stderr: `text` for people, `json` (one object a line) for machines.
#include <mutex>
#include <string>

#include <nlohmann/json.hpp>

namespace dflash::server {

class RequestLog {
 public:
  explicit RequestLog(bool json) : json_(json) {}
  // fields: an object of scalars, printed in order.
  void write(const std::string& event, const nlohmann::ordered_json& fields);

 private:
  bool json_;
  std::mutex mu_;
};

}  // namespace dflash::server
