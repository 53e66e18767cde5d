#pragma once
// httplib's task queue with a thread per connection in flight, up to a maximum: a connection
// holds its thread for its whole life (waiting in the request queue, streaming, idling between
// keep-alive requests), so a fixed pool is a fixed number of clients, and a few slow sockets
// starved everyone else. Threads start on demand and stay for the next connections.
#include <httplib.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace dflash::server {

class ElasticPool : public httplib::TaskQueue {
 public:
  explicit ElasticPool(int max_threads) : max_threads_(max_threads < 1 ? 1 : max_threads) {}
  ~ElasticPool() override { shutdown(); }

  void enqueue(std::function<void()> fn) override;
  void shutdown() override;  // runs what is queued, then joins every thread

 private:
  void work();

  const int max_threads_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  std::vector<std::thread> threads_;
  int idle_ = 0;
  bool stopping_ = false;
};

}  // namespace dflash::server
