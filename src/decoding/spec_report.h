#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "decoding/generator.h"
#include "decoding/spec_stats.h"

namespace dflash {

// on | off (the controller never drafted) | fallback:<reason>
std::string spec_state(const SpecStats& s);
// The `dflash` object of --json output and of server responses.
nlohmann::json spec_stats_json(const SpecStats& s, const Timings& t);

}  // namespace dflash
