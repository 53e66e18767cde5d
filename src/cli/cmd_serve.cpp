// dflash serve: the OpenAI-compatible HTTP server (the server itself lives in src/server).
#include <filesystem>
#include <memory>
#include <string>

#include "formats/gguf.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "formats/json_file.h"
#include "models/dflash/dflash_draft.h"
#include "models/model_files.h"
#include "server/http_server.h"
#include "util/error.h"
#include "util/mapped_file.h"

namespace dflash::cli {

namespace {

struct ServeOpts {
  std::string model, draft;
  bool no_draft = false, no_adaptive = false;
  server::ServerOptions srv;
  CacheTypes cache;
};

// Defaults for fields a request leaves out come from the model's generation_config.json, as
// Hugging Face's generate() would use them; do_sample=false means greedy.
SamplingParams sampling_defaults(const std::string& dir) {
  SamplingParams s;
  s.temperature = 1.0f;
  const std::string path = dir + "/generation_config.json";
  if (!file_exists(path)) return s;
  try {
    const nlohmann::json g = read_json_file(path);
    if (g.contains("temperature") && g["temperature"].is_number()) s.temperature = g["temperature"].get<float>();
    if (g.contains("top_p") && g["top_p"].is_number()) s.top_p = g["top_p"].get<float>();
    if (g.contains("top_k") && g["top_k"].is_number_integer()) s.top_k = g["top_k"].get<int>();
    if (g.contains("min_p") && g["min_p"].is_number()) s.min_p = g["min_p"].get<float>();
    if (g.contains("do_sample") && g["do_sample"].is_boolean() && !g["do_sample"].get<bool>()) s.temperature = 0.0f;
  } catch (const Error&) {
    // A broken generation_config only loses these defaults; the model loader reports it.
  }
  return s;
}

void run_serve(ServeOpts& o) {
  const std::string dir = resolve_model_dir(o.model);
  std::string draft = o.draft;
  if (draft.empty() && o.model.empty() && !o.no_draft) draft = demo_draft_beside(dir);  // the shipped demo pair
  if (o.no_draft) draft.clear();
  if (o.model.empty() && o.srv.alias.empty()) o.srv.alias = "dflash-demo";
  if (o.srv.log_format != "text" && o.srv.log_format != "json") throw Error("--log-format must be text or json");
  // Mistakes a user can see without loading anything fail before the server listens.
  PairOptions po;
  po.weights = parse_weights_option(o.srv.engine.weights);
  apply_cache_types(o.cache, po);
  if (!has_gguf_suffix(dir) && !file_exists(dir + "/config.json")) throw file_error(dir, "no config.json: not a Hugging Face model folder");
  if (!draft.empty() && !has_gguf_suffix(draft) && !file_exists(draft + "/config.json"))
    throw file_error(draft, "no config.json: not a DFlash draft folder");

  server::ServerOptions& s = o.srv;
  s.engine.model_dir = dir;
  s.engine.draft_dir = draft;
  s.engine.adaptive = !o.no_adaptive;
  s.defaults = sampling_defaults(dir);
  po.model = dir;
  po.draft = draft;
  po.threads = s.engine.threads;
  po.need_tokenizer = true;
  s.load = [po] { return load_pair(po); };
  const int rc = server::run_server(s);
  if (rc != 0) throw Error("the server stopped because the model could not be loaded");
}

}  // namespace

void add_serve_command(CLI::App& app) {
  auto o = std::make_shared<ServeOpts>();
  server::ServerOptions& s = o->srv;
  auto* sub = app.add_subcommand("serve", "OpenAI-compatible HTTP server with a web chat page");
  sub->add_option("--model", o->model, "Hugging Face model folder (default: the shipped demo pair)");
  sub->add_option("--draft", o->draft, "DFlash draft folder or llama.cpp dflash GGUF: enables speculative decoding");
  sub->add_flag("--no-draft", o->no_draft, "Serve the demo target without its draft");
  sub->add_option("--host", s.host, "Address to bind")->capture_default_str();
  sub->add_option("--port", s.port, "Port (0: any free port)")->check(CLI::Range(0, 65535))->capture_default_str();
  sub->add_option("--block-size", s.engine.block_size, "Largest block (drafted tokens + 1); default: the draft's")
      ->check(CLI::Range(1, 256));
  sub->add_flag("--no-adaptive", o->no_adaptive, "Always draft a full block (no cost-based controller)");
  sub->add_option("--think-cap", s.think_cap, "Most tokens of thinking before </think> is forced (0: no cap)")
      ->check(CLI::Range(0, 1 << 30))
      ->capture_default_str();
  sub->add_option("--ctx-size", s.engine.ctx_size, "Context size in tokens (default: the model's, at most 8192)")
      ->check(CLI::Range(2, 1 << 22));
  sub->add_option("--threads", s.engine.threads, "Worker threads (default: all cores)")->check(CLI::Range(0, 1024));
  sub->add_option("--weights", s.engine.weights, "native (the checkpoint's own dtypes) | bf16 | q8 | q4 | f32 | f16")->capture_default_str();
  sub->add_option("--chunk-size", s.engine.chunk_size, "Prefill chunk size")->check(CLI::Range(1, 1 << 20));
  s.engine.parallel = 0;
  sub->add_option("--parallel", s.engine.parallel,
                  "Slots: requests generated at once, batched into one pass per step (0: from memory, 2-4)")
      ->check(CLI::Range(0, 64))
      ->capture_default_str();
  sub->add_option_function<size_t>(
         "--cache-ram", [o](size_t mib) { o->srv.engine.cache_ram = mib << 20; },
         "MiB of host memory for contexts of past conversations, shared by the slots (0: none; default 2048)")
      ->check(CLI::Range(size_t(0), size_t(1) << 24));
  sub->add_option("--prefill-budget", s.engine.prefill_budget,
                  "Prompt rows a slot puts in one pass while other slots generate")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  add_cache_type_options(sub, o->cache);
  sub->add_option("--api-key", s.api_key, "Require 'Authorization: Bearer KEY' (except /health and the page)")
      ->envname("DFLASH_API_KEY");
  sub->add_option("--alias", s.alias, "The model's name in the API (default: its folder name)");
  sub->add_option("--queue-size", s.queue_size, "Requests that may wait for a free slot (then 503)")
      ->check(CLI::Range(0, 4096))
      ->capture_default_str();
  sub->add_option("--log-format", s.log_format, "text | json")->capture_default_str();
  sub->add_option("--max-body", s.max_body, "Largest request body in bytes (then 413)")
      ->check(CLI::Range(size_t(1024), size_t(1) << 34))
      ->capture_default_str();
  sub->add_option("--header-timeout", s.limits.header_timeout_s, "Seconds a request's headers may take to arrive (then 408)")
      ->check(CLI::Range(1, 3600))
      ->capture_default_str();
  sub->add_option("--body-timeout", s.limits.body_timeout_s, "Seconds a request's body may take after its headers (then 408)")
      ->check(CLI::Range(1, 3600))
      ->capture_default_str();
  sub->add_option("--max-conns-per-client", s.limits.max_per_client,
                  "Open connections one client address may hold (then 503; 0: no limit)")
      ->check(CLI::Range(0, 1 << 20))
      ->capture_default_str();
  sub->add_option("--max-connections", s.limits.max_connections,
                  "Connections served at once, one thread each (later ones wait for a thread)")
      ->check(CLI::Range(4, 1 << 16))
      ->capture_default_str();
  sub->callback([o] { run_serve(*o); });
}

}  // namespace dflash::cli
