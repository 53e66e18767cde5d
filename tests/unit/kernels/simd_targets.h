#pragma once
// Highway dispatches each kernel to the best target this CPU runs. The kernels' tests also force
// every other target it runs (AVX2 without VNNI, the SSE ones, the emulated ones), so each SIMD
// path is checked against its plain twin on this machine, not only the one dispatch picks.
#include <hwy/targets.h>

#include <string>
#include <vector>

namespace dflash::test {

// Calls fn(target name) once per SIMD target this CPU supports with dispatch held to that target,
// then gives dispatch back. Returns the names in the order tried.
template <class Fn>
std::vector<std::string> for_each_simd_target(Fn&& fn) {
  std::vector<std::string> names;
  const int64_t supported = hwy::SupportedTargets();
  for (int64_t bit = 1; bit != 0 && bit <= supported; bit <<= 1) {
    if (!(supported & bit)) continue;
    hwy::SetSupportedTargetsForTest(bit);
    names.emplace_back(hwy::TargetName(bit));
    fn(names.back());
  }
  hwy::SetSupportedTargetsForTest(0);
  return names;
}

inline std::string joined(const std::vector<std::string>& names) {
  std::string s;
  for (const auto& n : names) s += n + " ";
  return s;
}

}  // namespace dflash::test
