#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <memory>
#include <vector>

#include <unistd.h>

#include "util/mapped_file.h"

namespace dflash {
namespace {

// alloc_pages hands out zeroed, writable, page-aligned memory of any size, 0 included; a
// buffer of a huge page or more starts on a huge-page boundary (so that it can be mapped with
// huge pages), and buffers are released when the last owner lets go.
TEST(AllocPages, ZeroedWritableAndAlignedForEverySize) {
  constexpr size_t kHuge = size_t(2) << 20;
  for (size_t bytes : {size_t(0), size_t(1), size_t(4095), size_t(4096), size_t(100000), kHuge - 1, kHuge,
                       kHuge + 1, 5 * kHuge + 12345}) {
    std::shared_ptr<uint8_t> p = alloc_pages(bytes);
    ASSERT_NE(nullptr, p.get()) << bytes;
    const uintptr_t a = reinterpret_cast<uintptr_t>(p.get());
    EXPECT_EQ(0u, a % 4096) << bytes;
    if (bytes >= kHuge) {
      EXPECT_EQ(0u, a % kHuge) << bytes;
    }
    size_t nonzero = 0;
    for (size_t i = 0; i < bytes; i += 997) nonzero += p.get()[i] != 0;
    if (bytes) nonzero += p.get()[bytes - 1] != 0;
    EXPECT_EQ(0u, nonzero) << bytes;
    if (bytes) {
      std::memset(p.get(), 0xA5, bytes);  // every byte asked for is writable
      EXPECT_EQ(0xA5, p.get()[bytes - 1]);
    }
  }
}

// The process's mapped size in bytes (/proc/self/statm: total program size in pages).
size_t mapped_bytes() {
  std::ifstream f("/proc/self/statm");
  size_t pages = 0;
  f >> pages;
  return pages * size_t(::sysconf(_SC_PAGESIZE));
}

TEST(AllocPages, ABufferAndTheSlackCutToAlignItAreUnmappedWhenReleased) {
  constexpr size_t kBytes = (size_t(40) << 20) + 4096 * 3;
  const size_t before = mapped_bytes();
  {
    std::vector<std::shared_ptr<uint8_t>> held;
    for (int i = 0; i < 8; ++i) held.push_back(alloc_pages(kBytes));
    const size_t during = mapped_bytes();
    EXPECT_GE(during, before + 8 * kBytes);
    // Only the rounded-up buffers stay mapped, not the huge page of slack each was cut from.
    EXPECT_LT(during, before + 8 * (kBytes + 4096) + (size_t(4) << 20));
  }
  EXPECT_LT(mapped_bytes(), before + (size_t(4) << 20));
}

}  // namespace
}  // namespace dflash
