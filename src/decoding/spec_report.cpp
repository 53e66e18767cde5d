#include "decoding/spec_report.h"

namespace dflash {

std::string spec_state(const SpecStats& s) {
  if (s.speculation.rfind("fallback:", 0) == 0) return s.speculation;
  return s.steps > 0 ? "on" : "off";
}

nlohmann::json spec_stats_json(const SpecStats& s, const Timings& t) {
  return {{"drafted", s.drafted},
          {"accepted", s.accepted},
          {"accept_rate", s.accept_rate()},
          {"accept_len", s.accept_len()},
          {"block_size", s.block_size},
          {"speculation", spec_state(s)},
          {"steps", s.steps},
          {"plain_steps", s.plain_steps},
          {"accept_lens", s.accept_lens},
          {"histogram", s.histogram},
          {"draft_ms", s.draft_s * 1e3},
          {"verify_ms", s.verify_s * 1e3},
          {"nonfinite_steps", s.nonfinite_steps},
          {"tok_per_s", t.decode_tok_s()}};
}

}  // namespace dflash
