#pragma once
// The connection layer under httplib's request parsing, so that one client cannot take the
// server from the others:
// - every connection runs on a thread of its own (an elastic pool, up to max_connections), so
//   slow sockets never hold the threads that /health and other clients need;
// - a request's headers must arrive within header_timeout_s of its first byte and its body
//   within body_timeout_s of the headers (httplib's read timeout is per recv, so a client that
//   trickles one byte a second never hit it); past that the answer is 408 and the connection
//   closes;
// - at most max_per_client connections from one address (503 beyond, before any read);
// - at most max_body bytes of body are read, whatever the framing (httplib caps only bodies
//   with a Content-Length, not chunked ones).
// httplib runs a connection's whole keep-alive loop on one thread, so handlers reach their
// connection through Connection::current() (thread-local): to see whether the client has gone
// and to close the connection after an answer that left a body unread.
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

namespace dflash::server {

struct ConnectionLimits {
  int header_timeout_s = 10;
  int body_timeout_s = 60;
  int idle_timeout_s = 5;       // keep-alive: how long a connection may wait for its next request
  int max_per_client = 128;     // 0: no limit
  int max_connections = 1024;   // connections served at once; later ones wait for a thread
  size_t max_body = 8u << 20;
};

class Connection {
 public:
  // The connection the calling thread serves; null outside a connection's thread.
  static Connection* current();

  // The peer closed or reset its end (checked without reading, so pipelined data stays).
  bool client_gone() const;
  // The request's headers are in: its body now has body_timeout_s.
  void headers_done();
  // The connection closes after this answer (a refused body was left unread on the socket).
  void close_after_response() { close_after_ = true; }
  // The request in progress ran out of time; the answer is a 408.
  bool timed_out() const { return timed_out_; }
  // The request sent more bytes than any accepted body needs (answered 413).
  bool over_budget() const { return over_budget_; }
  const char* timed_out_phase() const { return in_body_ ? "body" : "headers"; }

 private:
  friend class GuardedServer;
  friend class DeadlineStream;
  Connection(int fd, const ConnectionLimits& limits) : fd_(fd), limits_(limits) {}
  void begin_request();

  int fd_;
  const ConnectionLimits& limits_;
  std::chrono::steady_clock::time_point deadline_{};
  size_t read_budget_ = 0;
  bool in_body_ = false, timed_out_ = false, close_after_ = false, over_budget_ = false;
};

struct ConnectionCounts {
  uint64_t open = 0, refused = 0, timed_out = 0;
};

class GuardedServer : public httplib::Server {
 public:
  explicit GuardedServer(const ConnectionLimits& limits);
  ConnectionCounts counts() const;
  void widen_backlog();  // after bind_to_port

 private:
  bool process_and_close_socket(socket_t sock) override;
  bool admit(const std::string& ip);
  void release(const std::string& ip);
  void refuse(socket_t sock, const std::string& ip);
  void linger(socket_t sock);
  bool wait_for_request(class DeadlineStream& strm);

  ConnectionLimits limits_;
  mutable std::mutex mu_;
  std::map<std::string, int> per_client_;
  std::atomic<uint64_t> open_{0}, refused_{0}, timed_out_{0};
};

}  // namespace dflash::server
