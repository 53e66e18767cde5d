#include "server/request_queue.h"

#include <algorithm>
#include <chrono>

namespace dflash::server {

std::unique_ptr<RequestQueue::Ticket> RequestQueue::try_enter() {
  std::lock_guard<std::mutex> lk(mu_);
  if (order_.size() >= size_t(max_waiting_) + size_t(slots_)) return nullptr;
  const uint64_t id = next_id_++;
  order_.push_back(id);
  return std::unique_ptr<Ticket>(new Ticket(*this, id));
}

// Tickets leave order_ only when destroyed, so the first `slots_` of it are the running ones
// and those whose turn has come.
bool RequestQueue::has_turn(uint64_t id) const {
  int k = 0;
  for (auto it = order_.begin(); it != order_.end() && k < slots_; ++it, ++k)
    if (*it == id) return true;
  return false;
}

void RequestQueue::Ticket::wait_turn() {
  std::unique_lock<std::mutex> lk(q_.mu_);
  q_.cv_.wait(lk, [&] { return q_.has_turn(id_); });
  q_.running_.push_back(id_);
}

bool RequestQueue::Ticket::wait_turn_unless(const std::function<bool()>& abandoned, int poll_ms) {
  std::unique_lock<std::mutex> lk(q_.mu_);
  while (!q_.has_turn(id_)) {
    q_.cv_.wait_for(lk, std::chrono::milliseconds(poll_ms));
    if (q_.has_turn(id_)) break;
    lk.unlock();
    const bool gone = abandoned();
    lk.lock();
    if (gone) {
      q_.order_.remove(id_);
      lk.unlock();
      q_.cv_.notify_all();  // the ticket behind may have its turn now
      return false;
    }
  }
  q_.running_.push_back(id_);
  return true;
}

RequestQueue::Ticket::~Ticket() {
  {
    std::lock_guard<std::mutex> lk(q_.mu_);
    q_.order_.remove(id_);
    q_.running_.erase(std::remove(q_.running_.begin(), q_.running_.end(), id_), q_.running_.end());
  }
  q_.cv_.notify_all();
}

int RequestQueue::waiting() const {
  std::lock_guard<std::mutex> lk(mu_);
  return int(order_.size() - running_.size());
}

int RequestQueue::running() const {
  std::lock_guard<std::mutex> lk(mu_);
  return int(running_.size());
}

}  // namespace dflash::server
