#pragma once
#include "util/thread_pool.h"

namespace dflash::bench {

// Best-of-several read bandwidth in bytes/s over a buffer much larger than the caches, with
// the same threads the model uses: the roof that decode speed is compared against.
double measure_read_bandwidth(ThreadPool& pool, size_t bytes = size_t(1) << 30, int reps = 5);

// The bandwidth of a shared machine drifts between seconds (38 to 65 GB/s seen on one 2-core
// machine here), so each benchmarked model is held against the best of every measurement so
// far, the last one taken just before it: `best` is updated and returned (and the new
// measurement itself in `fresh`, when given).
double remeasure_read_bandwidth(ThreadPool& pool, double& best, double* fresh = nullptr);

}  // namespace dflash::bench
