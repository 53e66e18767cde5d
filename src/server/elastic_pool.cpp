#include "server/elastic_pool.h"

#include <chrono>

namespace dflash::server {

void ElasticPool::enqueue(std::function<void()> fn) {
  std::unique_lock<std::mutex> lk(mu_);
  jobs_.push_back(std::move(fn));
  // A new thread only when no idle one will take the job; past the maximum the job waits.
  if (idle_ < int(jobs_.size()) && int(threads_.size()) < max_threads_) threads_.emplace_back([this] { work(); });
  lk.unlock();
  cv_.notify_one();
}

void ElasticPool::work() {
  std::unique_lock<std::mutex> lk(mu_);
  for (;;) {
    ++idle_;
    cv_.wait(lk, [this] { return stopping_ || !jobs_.empty(); });
    --idle_;
    if (jobs_.empty()) return;  // stopping, nothing left
    std::function<void()> fn = std::move(jobs_.front());
    jobs_.pop_front();
    lk.unlock();
    fn();
    lk.lock();
  }
}

void ElasticPool::shutdown() {
  std::vector<std::thread> threads;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (stopping_ && threads_.empty()) return;
    stopping_ = true;
    threads.swap(threads_);
  }
  cv_.notify_all();
  for (std::thread& t : threads) t.join();
}

}  // namespace dflash::server
