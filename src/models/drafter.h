#pragma once
// What the speculative loop needs from a draft model. DFlash (v1) implements it; DFlash2 and
// test drafters do too.
#include <cstdint>
#include <vector>

#include "models/kv_cache.h"
#include "util/thread_pool.h"

namespace dflash {

class Drafter {
 public:
  virtual ~Drafter() = default;
  virtual int block_size() const = 0;                        // the checkpoint's default
  virtual const std::vector<int>& target_layers() const = 0;  // target layers to tap
  virtual int feature_dim() const = 0;                       // floats of taps per position
  virtual KVCache make_cache(int capacity) const = 0;
  // Appends context rows (target taps, [n][feature_dim]) at positions cache.length()...
  virtual void add_context(KVCache& cache, const float* features, int n, ThreadPool* pool) const = 0;
  // One block [first, MASK x (B-1)] at positions cache.length()..; writes logits of rows
  // 1..B-1 ([B-1][vocab]); the cache keeps only context rows afterwards.
  virtual void propose(KVCache& cache, int32_t first, int B, float* logits, ThreadPool* pool) const = 0;
};

}  // namespace dflash
