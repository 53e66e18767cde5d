#!/usr/bin/env bash
# The kernel unit tests built for 64-bit ARM and run under qemu-aarch64, twice: on a CPU model
# with the dot-product extension (the packed Q8_0/Q4_0 kernel takes SDOT) and on one without
# it (Highway's NEON code). Needs Debian's g++-aarch64-linux-gnu, qemu-user and the arm64
# libhwy-dev/libgtest-dev (scripts/install-deps.sh installs them). Only the kernels and util
# modules are built: they are what differs between architectures.
#   scripts/test-arm64.sh [BUILD_DIR]            (default build-arm64)
# With --engine, the whole dflash binary is cross-built too (cmake/aarch64-linux-gnu.cmake;
# a few minutes) and greedy generation on the demo pair is checked on ARM: with the DFlash2
# draft equal to without it, for bf16, q8 and q4 weights, on both CPU models.
#   scripts/test-arm64.sh --engine [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
engine=0
if [ "${1:-}" = --engine ]; then engine=1; shift; fi
out=${1:-build-arm64}
CXX=aarch64-linux-gnu-g++
for tool in "$CXX" qemu-aarch64; do
  command -v "$tool" >/dev/null || { echo "test-arm64: $tool not found (run scripts/install-deps.sh)" >&2; exit 1; }
done
for lib in libhwy.so libgtest.a; do
  [ -e "/usr/lib/aarch64-linux-gnu/$lib" ] || { echo "test-arm64: arm64 $lib not found (run scripts/install-deps.sh)" >&2; exit 1; }
done

mkdir -p "$out/obj"
flags=(-std=c++20 -O2 -ffp-contract=off -Wall -Wextra -Wno-unused-parameter -Werror=vexing-parse -Isrc
       -DDFLASH_SOURCE_DIR="\"$PWD\"" "-DHWY_DISABLED_TARGETS=(HWY_SVE|HWY_SVE2|HWY_SVE_256|HWY_SVE2_128)")  # as CMakeLists.txt
srcs=$(ls src/kernels/*.cpp src/kernels/*/*.cpp src/util/*.cpp tests/unit/kernels/*_test.cpp)
# Compile in parallel, only what changed since the last run.
printf '%s\n' $srcs | xargs -P "$(nproc)" -I{} sh -c '
  o="$0/obj/$(echo {} | tr / _).o"
  if [ ! -e "$o" ] || [ {} -nt "$o" ] || [ -n "$(find src -name "*.h" -newer "$o" | head -1)" ]; then
    '"$CXX"' '"${flags[*]@Q}"' -c {} -o "$o" || exit 255
  fi' "$out"
$CXX -o "$out/unit_kernels" "$out"/obj/*.o -L/usr/lib/aarch64-linux-gnu -lgtest_main -lgtest -lhwy -pthread

run() {  # run CPU_MODEL: the tests under that CPU; prints the integer kernel targets they checked
  # The loader and libraries are the arm64 packages' own (multiarch), found at their usual
  # paths; the cross toolchain's older libc under /usr/aarch64-linux-gnu hangs in
  # pthread_create under this qemu.
  qemu-aarch64 -cpu "$1" "$out/unit_kernels" \
    --gtest_brief=1 2>&1 | tee "$out/log-$1.txt" | grep -E "int8 matmul checked on|FAILED|PASSED|tests ran" || true
  grep -q "\[  PASSED  \]" "$out/log-$1.txt" && ! grep -q "\[  FAILED  \]" "$out/log-$1.txt"
}
echo "== arm64 with dotprod (qemu -cpu max)"
run max
grep -q "checked on: .*SDOT" "$out/log-max.txt" || { echo "test-arm64: the SDOT kernel was not used on -cpu max" >&2; exit 1; }
echo "== arm64 without dotprod (qemu -cpu cortex-a57)"
run cortex-a57
if grep -q "SDOT" "$out/log-cortex-a57.txt"; then echo "test-arm64: SDOT chosen on a CPU without it" >&2; exit 1; fi

if [ "$engine" = 1 ]; then
  cmake -S . -B "$out/engine" -G Ninja -DCMAKE_TOOLCHAIN_FILE="$PWD/cmake/aarch64-linux-gnu.cmake" \
    -DDFLASH_ASAN=OFF -DDFLASH_TESTS=OFF >/dev/null
  cmake --build "$out/engine" --target dflash -j"$(nproc)" >/dev/null
  ids() {  # ids CPU ARGS...: the generated token ids
    qemu-aarch64 -cpu "$1" "$out/engine/dflash" generate --prompt "def fibonacci(n):" --max-tokens 48 \
      --threads 2 --json "${@:2}" 2>/dev/null | /usr/bin/python3 -c '
import json, sys
d = json.load(sys.stdin)
s = d.get("dflash")
# A speculative run must really have speculated: drafts proposed and some accepted.
if s is not None and (s["speculation"] != "on" or s["accepted"] <= 0):
    sys.exit("speculation %s, %d accepted" % (s["speculation"], s["accepted"]))
print(d["ids"])'
  }
  for cpu in max cortex-a57; do
    for w in bf16 q8 q4; do
      plain=$(ids "$cpu" --weights "$w")
      spec=$(ids "$cpu" --weights "$w" --draft models/demo/draft2 --block-size 8 --no-adaptive)
      if [ -z "$plain" ] || [ "$plain" != "$spec" ]; then
        echo "test-arm64: $cpu $w: speculative output differs from plain" >&2
        echo "  plain $plain" >&2
        echo "  spec  $spec" >&2
        exit 1
      fi
      echo "== arm64 engine ($cpu, $w): DFlash2 output equals plain (${#plain} chars of ids)"
    done
  done
fi
echo "test-arm64: PASS"
