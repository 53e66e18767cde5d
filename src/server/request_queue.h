#pragma once
// Generation in `slots` slots with a bounded FIFO in front of them. A request takes a ticket
// when it arrives (or is refused when the queue is full), waits for its turn (a free slot, in
// arrival order), and gives the slot up when the ticket is destroyed, however the request ends:
// answered, failed or abandoned.
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <vector>

namespace dflash::server {

class RequestQueue {
 public:
  class Ticket {
   public:
    ~Ticket();
    Ticket(const Ticket&) = delete;
    Ticket& operator=(const Ticket&) = delete;
    void wait_turn();  // blocks until fewer than `slots` earlier tickets are left
    // The same, but gives up (false, leaving the queue) as soon as `abandoned` says so; it is
    // asked every `poll_ms` while waiting (a client that has gone, a server that stops).
    bool wait_turn_unless(const std::function<bool()>& abandoned, int poll_ms = 100);

   private:
    friend class RequestQueue;
    Ticket(RequestQueue& q, uint64_t id) : q_(q), id_(id) {}
    RequestQueue& q_;
    uint64_t id_;
  };

  // At most `slots` tickets run and at most max_waiting wait behind them.
  explicit RequestQueue(int max_waiting, int slots = 1)
      : max_waiting_(max_waiting < 0 ? 0 : max_waiting), slots_(slots < 1 ? 1 : slots) {}
  // The engine's slot count is known once the model has loaded; set it before any request.
  void set_slots(int slots) {
    std::lock_guard<std::mutex> lk(mu_);
    slots_ = slots < 1 ? 1 : slots;
  }

  // nullptr when the queue is full.
  std::unique_ptr<Ticket> try_enter();
  int capacity() const { return max_waiting_; }
  int waiting() const;   // tickets not running yet
  int running() const;   // tickets holding a slot
  int slots() const {
    std::lock_guard<std::mutex> lk(mu_);
    return slots_;
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::list<uint64_t> order_;
  uint64_t next_id_ = 1;
  std::vector<uint64_t> running_;
  int max_waiting_, slots_;
  bool has_turn(uint64_t id) const;  // mu_ held
};

}  // namespace dflash::server
