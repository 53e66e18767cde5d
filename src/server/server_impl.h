#pragma once
// Internals of run_server shared by the files that implement the endpoints.
#include <httplib.h>

#include <atomic>
#include <memory>
#include <optional>
#include <string>

#include "server/api_error.h"
#include "server/connection_guard.h"
#include "server/engine.h"
#include "server/http_server.h"
#include "server/metrics.h"
#include "server/openai_protocol.h"
#include "server/request_log.h"
#include "server/request_queue.h"

namespace dflash::server {

// One generation request after parsing: what the engine runs and how the answer is shaped.
struct Job {
  GenRequest gen;
  ResponseMeta meta;
  bool chat = false, stream = false, include_usage = false, return_tokens = false;
  int n = 1;  // choices, generated one after another; choice i samples with seed + i
  double t_arrival = 0;
  // Chat with tools and tool_choice other than "none": how the answer's calls are parsed.
  std::optional<ToolCallOptions> tools;
  // How the answer's calls are decoded (the "dflash" object's tool_grammar): "forced"
  // (required / named), "after_tag" (auto: each <tool_call> block under the call grammar),
  // or "off: why" (auto without a grammar: a schema the compiler refuses, or response_format).
  std::string tool_grammar;
};

class HttpServer {
 public:
  explicit HttpServer(const ServerOptions& opt);
  int run();
  void stop();

 private:
  void install_routes();
  void install_guards();
  bool authorized(const httplib::Request& req) const;
  bool refuse_body(const httplib::Request& req, httplib::Response& res);
  Engine* engine() const { return engine_.load(); }
  Engine& ready_engine() const;  // ApiError 503 while loading
  void check_model(const std::string& name) const;
  std::string next_id(const char* prefix);

  void handle_chat(const httplib::Request& req, httplib::Response& res);
  void handle_completion(const httplib::Request& req, httplib::Response& res);
  void handle_tokenize(const httplib::Request& req, httplib::Response& res);
  void handle_detokenize(const httplib::Request& req, httplib::Response& res);
  void handle_models(httplib::Response& res);

  // Fills the parts of a job both endpoints share; the prompt must be set.
  void finish_job(Job& job, const ApiRequest& api, Engine& e);
  void run_job(std::shared_ptr<Job> job, httplib::Response& res);
  void stream_job(const std::shared_ptr<Job>& job, std::unique_ptr<RequestQueue::Ticket> ticket, httplib::Response& res);
  bool provide_stream(const Job& job, std::unique_ptr<RequestQueue::Ticket>& ticket, httplib::DataSink& sink);
  void left_in_queue(const Job& job);
  Gauges gauges() const;
  void account(const Job& job, const GenResult& r, double queue_s);

  ServerOptions opt_;
  GuardedServer svr_;
  std::unique_ptr<Engine> engine_owner_;
  std::atomic<Engine*> engine_{nullptr};
  RequestQueue queue_;
  Metrics metrics_;
  RequestLog log_;
  std::atomic<bool> stopping_{false}, load_failed_{false};
  std::atomic<uint64_t> counter_{0};
  std::string model_name_, folder_name_;
  long long started_ = 0;
};

void send_json(httplib::Response& res, int status, const ojson& body);
void send_error(httplib::Response& res, const ApiError& e);

}  // namespace dflash::server
