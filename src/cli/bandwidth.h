#pragma once
#include "util/thread_pool.h"

namespace dflash::cli {

// Best-of-several read bandwidth in bytes/s over a buffer much larger than the caches, with
// the same threads the model uses: the roof that decode speed is compared against.
double measure_read_bandwidth(ThreadPool& pool, size_t bytes = size_t(1) << 30, int reps = 5);

}  // namespace dflash::cli
