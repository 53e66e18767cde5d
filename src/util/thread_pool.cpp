#include "util/thread_pool.h"

#include <algorithm>
#include <chrono>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define DFLASH_PAUSE() _mm_pause()
#elif defined(__aarch64__)
// ISB stalls for a few tens of cycles, as PAUSE does; a sched_yield syscall per spin would
// make each wait cost microseconds.
#define DFLASH_PAUSE() __asm__ __volatile__("isb" ::: "memory")
#else
#define DFLASH_PAUSE() std::this_thread::yield()
#endif

namespace dflash {

namespace {
constexpr int kSpins = 20000;  // ~tens of microseconds before a worker goes to sleep
}

ThreadPool::ThreadPool(int n_threads) : n_threads_(std::max(1, n_threads)) {
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_.store(true);
  }
  cv_start_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::run_tasks() {
  const int n = job_n_;
  for (int i; (i = next_.fetch_add(1, std::memory_order_relaxed)) < n;) (*job_)(i);
}

void ThreadPool::parallel_for(int n, const std::function<void(int)>& fn) {
  if (n <= 0) return;
  if (n_threads_ == 1 || n == 1) {
    for (int i = 0; i < n; ++i) fn(i);
    return;
  }
  {
    std::lock_guard<std::mutex> lk(mu_);
    job_ = &fn;
    job_n_ = n;
    next_.store(0, std::memory_order_relaxed);
    pending_.store(int(workers_.size()), std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
  }
  cv_start_.notify_all();
  run_tasks();
  for (int s = 0; s < kSpins && pending_.load(std::memory_order_acquire) > 0; ++s) DFLASH_PAUSE();
  if (pending_.load(std::memory_order_acquire) > 0) {
    std::unique_lock<std::mutex> lk(mu_);
    cv_done_.wait(lk, [this] { return pending_.load(std::memory_order_acquire) == 0; });
  }
}

void ThreadPool::worker_loop() {
  uint64_t seen = 0;
  for (;;) {
    for (int s = 0; s < kSpins && generation_.load(std::memory_order_acquire) == seen && !stop_.load(); ++s)
      DFLASH_PAUSE();
    if (generation_.load(std::memory_order_acquire) == seen) {
      std::unique_lock<std::mutex> lk(mu_);
      cv_start_.wait(lk, [&] { return stop_.load() || generation_.load(std::memory_order_acquire) != seen; });
    }
    if (stop_.load()) return;
    seen = generation_.load(std::memory_order_acquire);
    run_tasks();
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard<std::mutex> lk(mu_);
      cv_done_.notify_one();
    }
  }
}

int default_thread_count() {
  unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

}  // namespace dflash
