#include "server/request_queue.h"

#include <chrono>

namespace dflash::server {

std::unique_ptr<RequestQueue::Ticket> RequestQueue::try_enter() {
  std::lock_guard<std::mutex> lk(mu_);
  if (order_.size() >= size_t(max_waiting_) + 1) return nullptr;
  const uint64_t id = next_id_++;
  order_.push_back(id);
  return std::unique_ptr<Ticket>(new Ticket(*this, id));
}

void RequestQueue::Ticket::wait_turn() {
  std::unique_lock<std::mutex> lk(q_.mu_);
  q_.cv_.wait(lk, [&] { return q_.order_.front() == id_; });
  q_.running_id_ = id_;
}

bool RequestQueue::Ticket::wait_turn_unless(const std::function<bool()>& abandoned, int poll_ms) {
  std::unique_lock<std::mutex> lk(q_.mu_);
  while (q_.order_.front() != id_) {
    q_.cv_.wait_for(lk, std::chrono::milliseconds(poll_ms));
    if (q_.order_.front() == id_) break;
    lk.unlock();
    const bool gone = abandoned();
    lk.lock();
    if (gone) {
      q_.order_.remove(id_);
      lk.unlock();
      q_.cv_.notify_all();  // the ticket behind may be first now
      return false;
    }
  }
  q_.running_id_ = id_;
  return true;
}

RequestQueue::Ticket::~Ticket() {
  {
    std::lock_guard<std::mutex> lk(q_.mu_);
    q_.order_.remove(id_);
    if (q_.running_id_ == id_) q_.running_id_ = 0;
  }
  q_.cv_.notify_all();
}

int RequestQueue::waiting() const {
  std::lock_guard<std::mutex> lk(mu_);
  return int(order_.size()) - (running_id_ != 0 ? 1 : 0);
}

bool RequestQueue::running() const {
  std::lock_guard<std::mutex> lk(mu_);
  return running_id_ != 0;
}

}  // namespace dflash::server
