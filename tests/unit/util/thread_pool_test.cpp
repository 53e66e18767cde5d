#include "util/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

namespace dflash {
namespace {

TEST(ThreadPool, RangesCoverEveryUnitOnceInPiecesWithinOneShare) {
  for (int threads : {1, 2, 3, 5}) {
    ThreadPool pool(threads);
    for (int64_t n : {0, 1, 2, 7, 64, 1000}) {
      for (int64_t grain : {1, 3, 16}) {
        std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
        std::atomic<int> bad_piece{0};
        const bool shared = threads > 1 && n > grain;  // else one piece, [0, n)
        auto share_of = [&](int64_t u) {               // share t is [n t / T, n (t + 1) / T)
          int t = 0;
          while (n * (t + 1) / threads <= u) ++t;
          return t;
        };
        pool.parallel_ranges(n, grain, [&](int64_t u0, int64_t u1) {
          if (u0 < 0 || u1 > n || u1 <= u0) bad_piece.fetch_add(1);
          else if (shared && share_of(u0) != share_of(u1 - 1)) bad_piece.fetch_add(1);
          else if (!shared && (u0 != 0 || u1 != n)) bad_piece.fetch_add(1);
          for (int64_t u = std::max<int64_t>(u0, 0); u < std::min(u1, n); ++u) hits[size_t(u)].fetch_add(1);
        });
        EXPECT_EQ(0, bad_piece.load()) << threads << " threads, n " << n << ", grain " << grain;
        for (int64_t u = 0; u < n; ++u)
          ASSERT_EQ(1, hits[size_t(u)].load()) << "unit " << u << ", " << threads << " threads, n " << n << ", grain " << grain;
      }
    }
  }
}

TEST(ThreadPool, IdleThreadTakesFromTheBackOfASlowThreadsShare) {
  // The share [0, 32) is slow (each unit sleeps), [32, 64) is not: its thread finishes at once
  // and must take units of the slow share from its back, so [0, 32) is run by both threads,
  // and its owner still takes its own units from the front in order.
  ThreadPool pool(2);
  std::vector<std::thread::id> who(64);
  std::mutex mu;
  pool.parallel_ranges(64, 1, [&](int64_t u0, int64_t u1) {
    for (int64_t u = u0; u < u1; ++u) {
      if (u < 32) std::this_thread::sleep_for(std::chrono::milliseconds(2));
      std::lock_guard<std::mutex> lk(mu);
      who[size_t(u)] = std::this_thread::get_id();
    }
  });
  std::set<std::thread::id> slow_share(who.begin(), who.begin() + 32);
  EXPECT_EQ(2u, slow_share.size());
  // The owner of unit 0 ran a prefix [0, k) of its share; the thief a suffix [k, 32).
  int64_t k = 0;
  while (k < 32 && who[size_t(k)] == who[0]) ++k;
  EXPECT_GT(k, 0);
  EXPECT_LT(k, 32);
  for (int64_t u = k; u < 32; ++u) EXPECT_NE(who[0], who[size_t(u)]) << u;
}

}  // namespace
}  // namespace dflash
