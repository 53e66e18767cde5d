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

// A share [front, back) of units in one word, so that its owner (from the front) and the
// threads that take from its back agree with one compare-and-swap.
struct alignas(64) ThreadPool::Share {
  std::atomic<uint64_t> fb{0};
  static uint64_t pack(int64_t f, int64_t b) { return uint64_t(f) | (uint64_t(b) << 32); }
  // The owner (front = true) takes a quarter of what is left, at least `grain` units; others
  // take `grain` units from the back. False when empty. The owner claims in shrinking pieces
  // because each claim is a locked instruction, which waits for the memory reads still in
  // flight (the weight stream's prefetches): claiming set by set cost decode ~4% of its time
  // in a profile. The pieces shrink to `grain` near the end, so a thread that runs out still
  // finds units to take.
  bool take(bool front, int64_t grain, int64_t& u0, int64_t& u1) {
    uint64_t v = fb.load(std::memory_order_relaxed);
    for (;;) {
      const int64_t f = int64_t(v & 0xffffffffu), b = int64_t(v >> 32);
      if (f >= b) return false;
      u0 = front ? f : std::max(f, b - grain);
      u1 = front ? std::min(b, f + std::max(grain, (b - f) / 4)) : b;
      const uint64_t nv = front ? pack(u1, b) : pack(f, u0);
      if (fb.compare_exchange_weak(v, nv, std::memory_order_acq_rel, std::memory_order_relaxed)) return true;
    }
  }
};

ThreadPool::ThreadPool(int n_threads) : n_threads_(std::max(1, n_threads)), shares_(new Share[size_t(n_threads_)]) {
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

void ThreadPool::parallel_ranges(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  const int T = n_threads_;
  if (T == 1 || n <= grain || n >= (int64_t(1) << 31)) {
    fn(0, n);
    return;
  }
  Share* const shares = shares_.get();
  for (int t = 0; t < T; ++t) shares[t].fb.store(Share::pack(n * t / T, n * (t + 1) / T));
  parallel_for(T, [&](int t) {
    int64_t u0, u1;
    while (shares[t].take(true, grain, u0, u1)) fn(u0, u1);
    for (int k = 1; k < T; ++k)
      while (shares[(t + k) % T].take(false, grain, u0, u1)) fn(u0, u1);
  });
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
