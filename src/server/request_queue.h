#pragma once
// Single-flight generation with a bounded FIFO in front of it. A request takes a ticket when
// it arrives (or is refused when the queue is full), waits for its turn, and gives the turn
// up when the ticket is destroyed, however the request ends: answered, failed or abandoned.
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>

namespace dflash::server {

class RequestQueue {
 public:
  class Ticket {
   public:
    ~Ticket();
    Ticket(const Ticket&) = delete;
    Ticket& operator=(const Ticket&) = delete;
    void wait_turn();  // blocks until every earlier ticket is gone
    // The same, but gives up (false, leaving the queue) as soon as `abandoned` says so; it is
    // asked every `poll_ms` while waiting (a client that has gone, a server that stops).
    bool wait_turn_unless(const std::function<bool()>& abandoned, int poll_ms = 100);

   private:
    friend class RequestQueue;
    Ticket(RequestQueue& q, uint64_t id) : q_(q), id_(id) {}
    RequestQueue& q_;
    uint64_t id_;
  };

  // At most one ticket runs and at most max_waiting wait behind it.
  explicit RequestQueue(int max_waiting) : max_waiting_(max_waiting < 0 ? 0 : max_waiting) {}

  // nullptr when the queue is full.
  std::unique_ptr<Ticket> try_enter();
  int capacity() const { return max_waiting_; }
  int waiting() const;   // tickets not running yet
  bool running() const;  // a ticket holds the turn

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::list<uint64_t> order_;
  uint64_t next_id_ = 1;
  uint64_t running_id_ = 0;
  int max_waiting_;
};

}  // namespace dflash::server
