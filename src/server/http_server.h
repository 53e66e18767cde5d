#pragma once
// `dflash serve`: the OpenAI-compatible HTTP server. It listens at once and loads the model in
// the background (/health answers 503 until it is ready).
#include <cstddef>
#include <functional>
#include <string>

#include "decoding/sampler.h"
#include "server/connection_guard.h"
#include "server/engine.h"

namespace dflash::server {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8006;                   // 0: any free port (the listening line names it)
  std::string api_key;               // empty: no authentication
  std::string alias;                 // the model's name in the API; empty: the folder name
  int queue_size = 32;               // requests that may wait for a free slot
  std::string log_format = "text";   // text | json
  size_t max_body = 8u << 20;        // bytes
  int think_cap = 12000;             // 0: none
  ConnectionLimits limits;           // deadlines and connection caps (max_body is set from above)
  SamplingParams defaults;           // for fields a request leaves out
  EngineOptions engine;
  std::function<LoadedModels()> load;  // runs on the loader thread
};

// Blocks until SIGINT/SIGTERM (returns 0) or a failed model load (returns 1).
int run_server(const ServerOptions& opt);

}  // namespace dflash::server
