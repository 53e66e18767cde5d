#include "server/http_server.h"

#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <random>
#include <thread>

#include "server/elastic_pool.h"
#include "server/server_impl.h"
#include "server/web/web_assets.h"
#include "util/error.h"

namespace dflash::server {

void send_json(httplib::Response& res, int status, const ojson& body) {
  res.status = status;
  res.set_content(dump(body), "application/json");
}

void send_error(httplib::Response& res, const ApiError& e) {
  send_json(res, e.status(), e.body());
  if (e.status() == 503) res.set_header("Retry-After", "1");
}

namespace {

std::string folder_name(std::string dir) {
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  const size_t slash = dir.rfind('/');
  return slash == std::string::npos ? dir : dir.substr(slash + 1);
}

// The page and health checks stay open when an API key is set: they reveal nothing.
bool is_open_path(const std::string& path) {
  return path == "/" || path == "/health" || path == "/app.js" || path == "/style.css" || path == "/favicon.ico";
}

std::string default_message(int status, const httplib::Request& req, size_t max_body) {
  switch (status) {
    case 404: return "no route for " + req.method + " " + req.path;
    case 405: return "method " + req.method + " not allowed on " + req.path;
    case 413:
      // Debian's httplib is a compiled library that caps form-encoded bodies at 8 KB before any
      // handler runs; `curl -d` without -H sends JSON under that type, so say how to fix it.
      if (req.get_header_value("Content-Type") == "application/x-www-form-urlencoded" &&
          req.get_header_value<uint64_t>("Content-Length") <= max_body)
        return "a body sent as application/x-www-form-urlencoded is limited to 8192 bytes; send the JSON "
               "with 'Content-Type: application/json'";
      return "the request body is larger than the limit of " + std::to_string(max_body) + " bytes (--max-body)";
    case 414: return "the request URI is too long";
    case 400: return "malformed HTTP request";
    default: return "HTTP error " + std::to_string(status);
  }
}

const char* error_type(int status) {
  if (status == 401) return "authentication_error";
  if (status >= 500) return "server_error";
  return "invalid_request_error";
}

}  // namespace

namespace {
ConnectionLimits limits_of(const ServerOptions& opt) {
  ConnectionLimits l = opt.limits;
  l.max_body = opt.max_body;
  return l;
}
}  // namespace

HttpServer::HttpServer(const ServerOptions& opt)
    : opt_(opt), svr_(limits_of(opt)), queue_(opt.queue_size), log_(opt.log_format == "json") {
  folder_name_ = folder_name(opt.engine.model_dir);
  model_name_ = opt.alias.empty() ? folder_name_ : opt.alias;
  started_ = (long long)std::time(nullptr);
  // A thread per open connection (see connection_guard.h): a request waiting for its turn,
  // an idle keep-alive or a slow socket never keeps /health or another client waiting.
  const int max_connections = opt.limits.max_connections;
  svr_.new_task_queue = [max_connections] { return new ElasticPool(max_connections); };
  svr_.set_payload_max_length(opt.max_body);
  // httplib's default SO_REUSEPORT would let a second server share the port silently;
  // SO_REUSEADDR alone still allows a quick restart.
  svr_.set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  svr_.set_read_timeout(30, 0);
  svr_.set_write_timeout(30, 0);
  svr_.set_keep_alive_max_count(1000);
  install_guards();
  install_routes();
}

bool HttpServer::authorized(const httplib::Request& req) const {
  if (opt_.api_key.empty()) return true;
  std::string given;
  const std::string auth = req.get_header_value("Authorization");
  if (auth.rfind("Bearer ", 0) == 0) given = auth.substr(7);
  else if (req.has_header("X-Api-Key")) given = req.get_header_value("X-Api-Key");
  // Constant-time comparison: the time taken must not reveal how much of a guess was right.
  unsigned diff = given.size() == opt_.api_key.size() ? 0u : 1u;
  for (size_t i = 0; i < given.size(); ++i) diff |= unsigned(uint8_t(given[i]) ^ uint8_t(opt_.api_key[i % opt_.api_key.size()]));
  return diff == 0;
}

void HttpServer::install_guards() {
  svr_.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    // Called once the headers are in and before the body is read.
    if (Connection* c = Connection::current()) c->headers_done();
    res.set_header("Access-Control-Allow-Origin", "*");
    if (refuse_body(req, res)) return httplib::Server::HandlerResponse::Handled;
    if (req.method == "OPTIONS") {
      res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
      res.set_header("Access-Control-Allow-Headers", "Authorization, Content-Type, X-Api-Key");
      res.status = 204;
      return httplib::Server::HandlerResponse::Handled;
    }
    if (!is_open_path(req.path) && !authorized(req)) {
      send_error(res, ApiError(401, "invalid or missing API key (send 'Authorization: Bearer <key>')",
                               "authentication_error", "", "invalid_api_key"));
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  // A client that asks before sending its body learns at once when the body would be refused.
  svr_.set_expect_100_continue_handler([this](const httplib::Request& req, httplib::Response& res) {
    return refuse_body(req, res) ? res.status : 100;
  });
  // Called for every answer with status >= 400: errors httplib raises itself (404, 413, bad
  // HTTP) get the OpenAI shape too, and every error is counted and logged once.
  svr_.set_error_handler(httplib::Server::HandlerWithResponse([this](const httplib::Request& req, httplib::Response& res) {
    if (Connection* c = Connection::current(); c && c->timed_out()) {
      // httplib saw a read fail and says 400; the reason was the request's deadline.
      res.status = 408;
      res.body.clear();
      const bool body = std::string(c->timed_out_phase()) == "body";
      send_json(res, 408, error_body(std::string("the request's ") + c->timed_out_phase() + " did not arrive within " +
                                         std::to_string(body ? opt_.limits.body_timeout_s : opt_.limits.header_timeout_s) +
                                         (body ? " s (--body-timeout)" : " s (--header-timeout)"),
                                     "invalid_request_error", "", "request_timeout"));
    }
    if (Connection* c = Connection::current(); c && c->over_budget()) {
      res.status = 413;
      res.body.clear();
    }
    if (res.body.empty()) {
      send_json(res, res.status,
                error_body(default_message(res.status, req, opt_.max_body), error_type(res.status), "",
                           res.status == 413 ? "payload_too_large" : ""));
    }
    metrics_.record_status(res.status);
    std::string message;
    const ojson body = ojson::parse(res.body, nullptr, false);
    if (body.is_object() && body.contains("error") && body["error"].is_object() && body["error"].contains("message") &&
        body["error"]["message"].is_string())
      message = body["error"]["message"].get<std::string>();
    log_.write("error", {{"status", res.status}, {"method", req.method}, {"path", req.path}, {"message", message}});
    return httplib::Server::HandlerResponse::Handled;
  }));
  svr_.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "internal error";
    try {
      std::rethrow_exception(ep);
    } catch (const ApiError& e) {
      send_error(res, e);
      return;
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    send_error(res, ApiError(500, what, "server_error"));
  });
}

// A body that will not be read is refused from its headers alone, before any byte of it is
// waited for (httplib would read and discard a too-large one first, up to its read timeout).
// The unread body makes the connection unusable, so it closes after the answer.
bool HttpServer::refuse_body(const httplib::Request& req, httplib::Response& res) {
  if (!req.has_header("Content-Length")) return false;
  const std::string v = req.get_header_value("Content-Length");
  std::string why;
  int status = 400;
  if (v.empty() || v.size() > 19 || v.find_first_not_of("0123456789") != std::string::npos) {
    why = "invalid Content-Length '" + v.substr(0, 40) + "'";
  } else if (std::stoull(v) > opt_.max_body) {
    status = 413;
  } else {
    return false;
  }
  if (Connection* c = Connection::current()) c->close_after_response();
  res.set_header("Connection", "close");
  if (status == 413)
    send_error(res, ApiError(413, default_message(413, req, opt_.max_body), "invalid_request_error", "", "payload_too_large"));
  else
    send_error(res, ApiError(400, why, "invalid_request_error", "", "invalid_content_length"));
  return true;
}

Gauges HttpServer::gauges() const {
  const ConnectionCounts c = svr_.counts();
  Gauges g;
  g.queue_depth = queue_.waiting();
  g.running = queue_.running();
  g.slots = queue_.slots();
  g.ready = engine() != nullptr;
  if (Engine* e = engine()) {
    for (const SlotInfo& s : e->slot_info()) g.per_slot.push_back({s.busy, s.cached_tokens, s.requests, s.tokens});
    g.batch = e->batch_stats();
    g.cache = e->cache_stats();
  }
  g.open_connections = c.open;
  g.refused_connections = c.refused;
  g.timed_out_requests = c.timed_out;
  return g;
}

Engine& HttpServer::ready_engine() const {
  Engine* e = engine();
  if (!e) throw ApiError(503, "the model is still loading; retry shortly (GET /health turns 200 when ready)", "server_error", "", "loading");
  return *e;
}

void HttpServer::check_model(const std::string& name) const {
  if (name.empty() || name == model_name_ || name == folder_name_ || name == "default" || name == opt_.engine.model_dir)
    return;
  throw ApiError(404, "the model '" + name + "' does not exist; this server serves '" + model_name_ + "'",
                 "invalid_request_error", "model", "model_not_found");
}

std::string HttpServer::next_id(const char* prefix) {
  static const uint64_t salt = std::random_device{}() | (uint64_t(std::random_device{}()) << 32);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%s-%08llx%06llx", prefix, (unsigned long long)(salt & 0xffffffffu),
                (unsigned long long)++counter_);
  return buf;
}

void HttpServer::handle_models(httplib::Response& res) {
  ojson m = {{"id", model_name_}, {"object", "model"}, {"created", started_}, {"owned_by", "dflash"}};
  if (Engine* e = engine()) {
    m["meta"] = {{"model_dir", e->model_dir()},
                 {"draft_dir", e->draft_dir()},
                 {"speculative", e->has_draft()},
                 {"block_size", e->block_size()},
                 {"ctx_size", e->ctx_size()},
                 {"vocab", e->config().vocab},
                 {"weights", e->weights()},
                 {"threads", e->threads()},
                 {"think_cap", opt_.think_cap},
                 {"reasoning", e->think_tokens().known()}};
  }
  send_json(res, 200, {{"object", "list"}, {"data", {m}}});
}

void HttpServer::install_routes() {
  auto guarded = [this](void (HttpServer::*fn)(const httplib::Request&, httplib::Response&)) {
    return [this, fn](const httplib::Request& req, httplib::Response& res) {
      try {
        // httplib enforces the limit on Content-Length bodies only; chunked ones get here.
        if (req.body.size() > opt_.max_body)
          throw ApiError(413, default_message(413, req, opt_.max_body), "invalid_request_error", "", "payload_too_large");
        (this->*fn)(req, res);
      } catch (const ApiError& e) {
        send_error(res, e);
      } catch (const Error& e) {
        send_error(res, ApiError(400, e.what()));
      }
    };
  };
  svr_.Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(web::index_html(), "text/html; charset=utf-8");
  });
  svr_.Get("/app.js", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(web::app_js(), "text/javascript; charset=utf-8");
  });
  svr_.Get("/style.css", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(web::style_css(), "text/css; charset=utf-8");
  });
  svr_.Get("/favicon.ico", [](const httplib::Request&, httplib::Response& res) { res.status = 204; });
  svr_.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    if (engine()) send_json(res, 200, {{"status", "ok"}});
    else send_json(res, 503, {{"status", load_failed_ ? "error" : "loading"}});
  });
  svr_.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics_.prometheus(gauges()),
                    "text/plain; version=0.0.4");
  });
  svr_.Get("/v1/stats", [this](const httplib::Request&, httplib::Response& res) {
    send_json(res, 200, metrics_.stats(gauges()));
  });
  for (const char* p : {"/v1/models", "/models"})
    svr_.Get(p, [this](const httplib::Request&, httplib::Response& res) { handle_models(res); });
  for (const char* p : {"/v1/chat/completions", "/chat/completions"}) svr_.Post(p, guarded(&HttpServer::handle_chat));
  for (const char* p : {"/v1/completions", "/completions"}) svr_.Post(p, guarded(&HttpServer::handle_completion));
  svr_.Post("/tokenize", guarded(&HttpServer::handle_tokenize));
  svr_.Post("/detokenize", guarded(&HttpServer::handle_detokenize));
}

void HttpServer::stop() {
  stopping_.store(true);
  if (Engine* e = engine()) e->shut_down();
  // stop() before listen() has started would be lost.
  for (int i = 0; i < 500 && !svr_.is_running(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  svr_.stop();
}

int HttpServer::run() {
  int port = opt_.port;
  if (port == 0) {
    port = svr_.bind_to_any_port(opt_.host);
    if (port < 0) throw Error("cannot bind to " + opt_.host + " (any port)");
  } else if (!svr_.bind_to_port(opt_.host, port)) {
    throw Error("cannot listen on " + opt_.host + ":" + std::to_string(port) + " (in use, or not an address here?)");
  }
  svr_.widen_backlog();
  std::fprintf(stderr, "dflash serve: listening on http://%s:%d (loading %s)\n", opt_.host.c_str(), port,
               opt_.engine.model_dir.c_str());
  std::fflush(stderr);

  std::thread loader([this] {
    try {
      const auto t0 = std::chrono::steady_clock::now();
      engine_owner_ = std::make_unique<Engine>(opt_.load(), opt_.engine);
      Engine* e = engine_owner_.get();
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      log_.write("ready", {{"model", model_name_},
                           {"dir", e->model_dir()},
                           {"draft", e->has_draft() ? e->draft_dir() : std::string("none")},
                           {"block_size", e->block_size()},
                           {"ctx_size", e->ctx_size()},
                           {"weights", e->weights()},
                           {"threads", e->threads()},
                           {"parallel", e->parallel()},
                           {"load_s", s}});
      queue_.set_slots(e->parallel());
      e->set_queued([this] { return queue_.waiting(); });
      engine_.store(e);
      if (stopping_) e->shut_down();
    } catch (const std::exception& ex) {
      std::fprintf(stderr, "dflash: error: %s\n", ex.what());
      load_failed_ = true;
      stop();
    }
  });
  svr_.listen_after_bind();
  stopping_.store(true);
  loader.join();
  return load_failed_ ? 1 : 0;
}

int run_server(const ServerOptions& opt) {
  // SIGINT/SIGTERM go to one thread that stops the server cleanly; every other thread (created
  // after this) inherits the blocked mask.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  signal(SIGPIPE, SIG_IGN);
  HttpServer server(opt);
  std::thread([&server, set] {
    int sig = 0;
    sigwait(&set, &sig);
    std::fprintf(stderr, "dflash serve: signal %d, shutting down\n", sig);
    server.stop();
  }).detach();
  return server.run();
}

}  // namespace dflash::server
