#include "server/request_log.h"

#include <cstdio>
#include <chrono>

namespace dflash::server {

void RequestLog::write(const std::string& event, const nlohmann::ordered_json& fields) {
  std::string line;
  if (json_) {
    const double ts = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    nlohmann::ordered_json j = {{"ts", ts}, {"event", event}};
    for (const auto& [k, v] : fields.items()) j[k] = v;
    line = j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  } else {
    line = "dflash serve: " + event;
    for (const auto& [k, v] : fields.items()) {
      line += ' ' + k + '=';
      if (v.is_string()) line += v.get<std::string>();
      else if (v.is_number_float()) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.2f", v.get<double>());
        line += buf;
      } else line += v.dump();
    }
  }
  line += '\n';
  std::lock_guard<std::mutex> lk(mu_);
  std::fputs(line.c_str(), stderr);
  std::fflush(stderr);
}

}  // namespace dflash::server
