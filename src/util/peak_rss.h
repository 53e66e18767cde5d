#pragma once
// Peak resident memory of this process, for the bench (and the memory free now, for sizing). Linux keeps the high-water mark in
// /proc/self/status (VmHWM) and lets a process reset it (writing 5 to clear_refs), so each
// benchmark row can report its own peak instead of the largest since start.
#include <cstdint>
#include <cstdio>
#include <cstring>

namespace dflash {

inline int64_t peak_rss_bytes() {
  std::FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return -1;
  char line[256];
  int64_t kb = -1;
  while (std::fgets(line, sizeof line, f))
    if (std::strncmp(line, "VmHWM:", 6) == 0) {
      long long v = 0;
      if (std::sscanf(line + 6, "%lld", &v) == 1) kb = v;
      break;
    }
  std::fclose(f);
  return kb < 0 ? -1 : kb * 1024;
}

// MemAvailable of /proc/meminfo (what can be allocated without swapping); 0 if unknown.
inline uint64_t available_memory_bytes() {
  std::FILE* f = std::fopen("/proc/meminfo", "r");
  if (!f) return 0;
  char line[256];
  unsigned long long kb = 0;
  while (std::fgets(line, sizeof line, f))
    if (std::strncmp(line, "MemAvailable:", 13) == 0) {
      if (std::sscanf(line + 13, "%llu", &kb) != 1) kb = 0;
      break;
    }
  std::fclose(f);
  return uint64_t(kb) * 1024;
}

// Returns false where the kernel does not allow it; the peak then counts from process start.
inline bool reset_peak_rss() {
  std::FILE* f = std::fopen("/proc/self/clear_refs", "w");
  if (!f) return false;
  const bool ok = std::fputs("5", f) >= 0;
  return std::fclose(f) == 0 && ok;
}

}  // namespace dflash
