#include "bench/bandwidth.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "util/mapped_file.h"
#include "util/timer.h"

namespace dflash::bench {

double measure_read_bandwidth(ThreadPool& pool, size_t bytes, int reps) {
  const size_t n = bytes / sizeof(uint64_t);
  // The same kind of pages as the repacked weights (alloc_pages: huge pages where the system
  // gives them): small pages would cost TLB misses that the weights' stream does not pay, and
  // so lower the roof that decode is held against.
  const std::shared_ptr<uint8_t> mem = alloc_pages(n * sizeof(uint64_t));
  uint64_t* const buf = reinterpret_cast<uint64_t*>(mem.get());
  for (size_t i = 0; i < n; ++i) buf[i] = i;
  const int tasks = pool.size() * 8;
  std::vector<uint64_t> sums(size_t(tasks) * 8);
  double best = 0;
  for (int r = 0; r < reps; ++r) {
    const double t0 = now_seconds();
    pool.parallel_for(tasks, [&](int t) {
      const size_t b = n * size_t(t) / size_t(tasks), e = n * size_t(t + 1) / size_t(tasks);
      uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
      size_t i = b;
      for (; i + 4 <= e; i += 4) {
        a0 += buf[i];
        a1 += buf[i + 1];
        a2 += buf[i + 2];
        a3 += buf[i + 3];
      }
      for (; i < e; ++i) a0 += buf[i];
      sums[size_t(t) * 8] = a0 + a1 + a2 + a3;  // one cache line apart: no false sharing
    });
    const double dt = now_seconds() - t0;
    best = std::max(best, double(bytes) / dt);
  }
  volatile uint64_t sink = 0;
  for (size_t t = 0; t < sums.size(); t += 8) sink = sink + sums[t];
  return best;
}

double remeasure_read_bandwidth(ThreadPool& pool, double& best, double* fresh) {
  const double now = measure_read_bandwidth(pool);
  if (fresh) *fresh = now;
  best = std::max(best, now);
  return best;
}

}  // namespace dflash::bench
