#pragma once
// A fixed pool that runs parallel_for over task indices. Work is split by output element, never
// inside a reduction, so results do not depend on the thread count (batch invariance).
// Workers spin briefly between jobs (a decode step issues hundreds of small jobs) and then
// sleep, so an idle pool costs no CPU.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace dflash {

class ThreadPool {
 public:
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }
  // Runs fn(i) for i in [0, n); the caller thread takes part. Tasks are claimed dynamically.
  void parallel_for(int n, const std::function<void(int)>& fn);

 private:
  void worker_loop();
  void run_tasks();
  int n_threads_;
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable cv_start_, cv_done_;
  const std::function<void(int)>* job_ = nullptr;
  int job_n_ = 0;
  std::atomic<int> next_{0};
  std::atomic<int> pending_{0};      // workers still inside the current job
  std::atomic<uint64_t> generation_{0};
  std::atomic<bool> stop_{false};
};

int default_thread_count();

}  // namespace dflash
