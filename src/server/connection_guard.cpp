#include "server/connection_guard.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace dflash::server {

namespace {

thread_local Connection* t_current = nullptr;

using Clock = std::chrono::steady_clock;

// "a.b.c.d" or an IPv6 address, and the port, of getpeername's or getsockname's answer.
std::string address_of(int fd, bool peer, int* port) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  *port = 0;
  if ((peer ? getpeername : getsockname)(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return "";
  char buf[INET6_ADDRSTRLEN] = {0};
  if (addr.ss_family == AF_INET) {
    auto* a = reinterpret_cast<sockaddr_in*>(&addr);
    inet_ntop(AF_INET, &a->sin_addr, buf, sizeof buf);
    *port = ntohs(a->sin_port);
  } else if (addr.ss_family == AF_INET6) {
    auto* a = reinterpret_cast<sockaddr_in6*>(&addr);
    inet_ntop(AF_INET6, &a->sin6_addr, buf, sizeof buf);
    *port = ntohs(a->sin6_port);
  }
  return buf;
}

// poll() one socket for up to `ms` milliseconds; true when the events came.
bool wait_fd(int fd, short events, int ms) {
  pollfd p{fd, events, 0};
  int r;
  do r = poll(&p, 1, ms); while (r < 0 && errno == EINTR);
  return r > 0;
}

// An answer written straight to the socket, for when httplib has not parsed a request to
// answer (a refused connection, a request whose first line never arrived).
void write_raw_error(int fd, const char* status_line, const std::string& message, const char* code) {
  const std::string body = "{\"error\":{\"message\":\"" + message +
                           "\",\"type\":\"invalid_request_error\",\"param\":null,\"code\":\"" + code + "\"}}";
  const std::string all = std::string("HTTP/1.1 ") + status_line +
                          "\r\nContent-Type: application/json\r\nRetry-After: 1\r\nConnection: close\r\n"
                          "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  if (wait_fd(fd, POLLOUT, 1000)) (void)!send(fd, all.data(), all.size(), MSG_NOSIGNAL);
}

}  // namespace

// httplib's Stream over one connection, reading through a buffer (httplib reads headers a
// byte at a time) under the request's deadline and byte budget.
class DeadlineStream : public httplib::Stream {
 public:
  DeadlineStream(Connection& c, time_t read_timeout_s, time_t write_timeout_s)
      : c_(c), read_timeout_ms_(int(read_timeout_s * 1000)), write_timeout_ms_(int(write_timeout_s * 1000)) {
    ip_ = address_of(c.fd_, true, &port_);
  }

  bool is_readable() const override { return buffered() > 0 || wait_fd(c_.fd_, POLLIN, read_timeout_ms_); }
  bool is_writable() const override { return wait_fd(c_.fd_, POLLOUT, write_timeout_ms_); }

  ssize_t read(char* ptr, size_t size) override {
    if (buffered() == 0 && !fill()) return -1;
    const size_t n = std::min(size, buffered());
    std::memcpy(ptr, buf_ + pos_, n);
    pos_ += n;
    return ssize_t(n);
  }

  ssize_t write(const char* ptr, size_t size) override {
    if (!is_writable()) return -1;
    ssize_t n;
    do n = send(c_.fd_, ptr, size, MSG_NOSIGNAL); while (n < 0 && errno == EINTR);
    if (n > 0) written_ += size_t(n);
    return n;
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    ip = ip_;
    port = port_;
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override { ip = address_of(c_.fd_, false, &port); }
  socket_t socket() const override { return c_.fd_; }

  size_t buffered() const { return len_ - pos_; }
  size_t written() const { return written_; }
  const std::string& ip() const { return ip_; }

 private:
  // One recv into the buffer, waiting at most until the read timeout or the request's
  // deadline, whichever comes first.
  bool fill() {
    if (c_.read_budget_ == 0) {
      c_.over_budget_ = true;
      return false;
    }
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(c_.deadline_ - Clock::now()).count();
    if (left <= 0) {
      c_.timed_out_ = true;
      return false;
    }
    if (!wait_fd(c_.fd_, POLLIN, int(std::min<long long>(left, read_timeout_ms_)))) {
      // The wait that ran out was the deadline's, not the per-read timeout's.
      if (left <= read_timeout_ms_) c_.timed_out_ = true;
      return false;
    }
    ssize_t n;
    do n = recv(c_.fd_, buf_, std::min(sizeof buf_, c_.read_budget_), 0); while (n < 0 && errno == EINTR);
    if (n <= 0) return false;
    c_.read_budget_ -= size_t(n);
    pos_ = 0;
    len_ = size_t(n);
    return true;
  }

  Connection& c_;
  int read_timeout_ms_, write_timeout_ms_;
  std::string ip_;
  int port_ = 0;
  char buf_[4096];
  size_t pos_ = 0, len_ = 0, written_ = 0;
};

Connection* Connection::current() { return t_current; }

bool Connection::client_gone() const {
  pollfd p{fd_, POLLIN | POLLRDHUP, 0};
  if (poll(&p, 1, 0) <= 0) return false;
  return (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
}

void Connection::begin_request() {
  deadline_ = Clock::now() + std::chrono::seconds(limits_.header_timeout_s);
  // Headers, the body and its chunked framing: generous, but never unbounded.
  read_budget_ = limits_.max_body + limits_.max_body / 8 + (1u << 20);
  in_body_ = timed_out_ = close_after_ = over_budget_ = false;
}

void Connection::headers_done() {
  in_body_ = true;
  deadline_ = Clock::now() + std::chrono::seconds(limits_.body_timeout_s);
}

GuardedServer::GuardedServer(const ConnectionLimits& limits) : limits_(limits) {}

// httplib listens with a backlog of 5: a burst of connections waited for SYN retries (1 s,
// then 3 s) before the server saw them. Linux takes a second listen() as a new backlog.
void GuardedServer::widen_backlog() {
  const socket_t s = svr_sock_;
  if (s != INVALID_SOCKET) ::listen(s, SOMAXCONN);
}

ConnectionCounts GuardedServer::counts() const { return {open_.load(), refused_.load(), timed_out_.load()}; }

bool GuardedServer::admit(const std::string& ip) {
  std::lock_guard<std::mutex> lk(mu_);
  int& n = per_client_[ip];
  if (limits_.max_per_client > 0 && n >= limits_.max_per_client) {
    if (n == 0) per_client_.erase(ip);
    return false;
  }
  ++n;
  ++open_;
  return true;
}

void GuardedServer::release(const std::string& ip) {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = per_client_.find(ip);
  if (it != per_client_.end() && --it->second <= 0) per_client_.erase(it);
  --open_;
}

// Answered before anything is read: the client learns why, and the thread is free at once.
void GuardedServer::refuse(socket_t sock, const std::string& ip) {
  ++refused_;
  write_raw_error(sock, "503 Service Unavailable",
                  "too many connections from " + ip + " (at most " + std::to_string(limits_.max_per_client) +
                      ", --max-conns-per-client)",
                  "too_many_connections");
  shutdown(sock, SHUT_WR);
  // A short drain so the close does not reset the connection before the client reads.
  char sink[4096];
  for (int i = 0; i < 16 && wait_fd(sock, POLLIN, 50); ++i)
    if (recv(sock, sink, sizeof sink, 0) <= 0) break;
}

// A refused body may still be on its way: closing now would reset the connection and the
// client, still writing, would never read the answer. So the answer's side is closed and what
// arrives is read and dropped for a bounded time and size (nginx's lingering close).
void GuardedServer::linger(socket_t sock) {
  shutdown(sock, SHUT_WR);
  char sink[16384];
  size_t left = size_t(64) << 20;
  const auto until = Clock::now() + std::chrono::seconds(2);
  while (left > 0 && Clock::now() < until && wait_fd(sock, POLLIN, 200)) {
    const ssize_t n = recv(sock, sink, std::min(sizeof sink, left), 0);
    if (n <= 0) break;
    left -= size_t(n);
  }
}

// Keep-alive: true when the next request's first byte is there, within the idle timeout;
// checked in slices so that a stopping server does not wait the whole timeout.
bool GuardedServer::wait_for_request(DeadlineStream& strm) {
  if (strm.buffered() > 0) return true;
  for (int waited = 0; waited < limits_.idle_timeout_s * 1000; waited += 100) {
    if (svr_sock_ == INVALID_SOCKET) return false;
    if (wait_fd(strm.socket(), POLLIN, 100)) return true;
  }
  return false;
}

bool GuardedServer::process_and_close_socket(socket_t sock) {
  int port = 0;
  const std::string ip = address_of(sock, true, &port);
  bool ret = false;
  if (!admit(ip)) {
    refuse(sock, ip);
  } else {
    Connection conn(sock, limits_);
    DeadlineStream strm(conn, read_timeout_sec_, write_timeout_sec_);
    t_current = &conn;
    for (size_t count = keep_alive_max_count_; count > 0 && svr_sock_ != INVALID_SOCKET; --count) {
      if (!wait_for_request(strm)) break;
      conn.begin_request();
      const size_t written_before = strm.written();
      bool closed = false;
      try {
        ret = process_request(strm, count == 1, closed, nullptr);
      } catch (const std::exception& e) {
        // Nothing thrown while answering may end the process: this connection ends instead.
        std::fprintf(stderr, "dflash serve: connection from %s ended by an error: %s\n", ip.c_str(), e.what());
        ret = false;
      } catch (...) {
        std::fprintf(stderr, "dflash serve: connection from %s ended by an unknown error\n", ip.c_str());
        ret = false;
      }
      if (conn.timed_out_) {
        ++timed_out_;
        // httplib answers a request whose headers broke off (mapped to 408 by the server's
        // error handler); one whose first line never came gets its 408 here.
        if (strm.written() == written_before)
          write_raw_error(sock, "408 Request Timeout",
                          "the request's headers did not arrive within " + std::to_string(limits_.header_timeout_s) +
                              " s (--header-timeout)",
                          "request_timeout");
      }
      if (!ret || closed || conn.timed_out_ || conn.close_after_ || conn.over_budget_) break;
    }
    t_current = nullptr;
    if (conn.close_after_ || conn.over_budget_) linger(sock);
    release(ip);
  }
  shutdown(sock, SHUT_RDWR);
  close(sock);
  return ret;
}

}  // namespace dflash::server
