#pragma once
// A fixed pool that runs parallel_for over task indices. Work is split by output element, never
// inside a reduction, so results do not depend on the thread count (batch invariance).
// Workers spin briefly between jobs (a decode step issues hundreds of small jobs) and then
// sleep, so an idle pool costs no CPU.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
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
  // Runs fn(u0, u1) over pieces that cover [0, n) exactly once. Each thread owns an equal share
  // and takes it from the front, in pieces of a quarter of what is left (at least `grain`
  // units), so it reads its share as one sequential stream; a thread that runs out takes
  // pieces of `grain` units from the back of the others' shares. The last thread to finish
  // waits for one piece, where equal static tasks would leave it a whole task behind. A piece
  // never spans two shares; a lone thread gets [0, n) as one piece.
  void parallel_ranges(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

 private:
  struct Share;  // one thread's share of parallel_ranges' units (complete in the .cpp, where
                 // the constructor and destructor are)
  void worker_loop();
  void run_tasks();
  int n_threads_;
  std::unique_ptr<Share[]> shares_;
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
