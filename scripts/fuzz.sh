#!/usr/bin/env bash
# Builds the libFuzzer harnesses of fuzz/ with clang (ASan + UBSan) into build-fuzz/, builds their
# seed corpora from files in the repository, and runs each harness for a while. Prints, per
# target, the number of executions and whether a crash, timeout, leak or out-of-memory was found;
# exits 1 if any was, 2 if the fuzzers cannot be built (no clang or no libFuzzer). docs/fuzzing.md.
#
#   scripts/fuzz.sh [--seconds N] [--smoke] [TARGET...]
#
#   --seconds N  run each harness N seconds (default 300); the corpus in build-fuzz/corpus/<target>
#                is kept and grows from run to run
#   --smoke      each harness ~10 s with a fixed seed from a fresh corpus (build-fuzz/corpus-smoke),
#                as the ctest test fuzz.smoke does
#   TARGET       safetensors gguf tokenizer chat_template openai_request tool_calls (default: all)
# Env: FUZZ_CXX (default clang++-14, else clang++), FUZZ_JOBS (build jobs, default 2).
set -euo pipefail
cd "$(dirname "$0")/.."

ALL_TARGETS=(safetensors gguf tokenizer chat_template openai_request tool_calls)
# Longest input per target: above the largest seed (a real chat template or tokenizer.json is
# 10-20 KB), small enough to keep executions fast.
declare -A MAX_LEN=([safetensors]=16384 [gguf]=8192 [tokenizer]=32768 [chat_template]=32768 [openai_request]=8192 [tool_calls]=4096)
declare -A DICT=([safetensors]=json [tokenizer]=json [chat_template]=jinja [openai_request]=json [tool_calls]=tool_calls)

seconds=300
smoke=0
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds="${2:?--seconds needs a number}"; shift 2 ;;
    --seconds=*) seconds="${1#*=}"; shift ;;
    --smoke) smoke=1; shift ;;
    -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "fuzz.sh: unknown option $1" >&2; exit 2 ;;
    *) [ -n "${MAX_LEN[$1]:-}" ] || { echo "fuzz.sh: unknown target '$1' (known: ${ALL_TARGETS[*]})" >&2; exit 2; }
       targets+=("$1"); shift ;;
  esac
done
[ ${#targets[@]} -gt 0 ] || targets=("${ALL_TARGETS[@]}")
if ! [[ "$seconds" =~ ^[1-9][0-9]*$ ]]; then echo "fuzz.sh: --seconds must be a positive integer" >&2; exit 2; fi
[ "$smoke" = 1 ] && seconds=10

BUILD=build-fuzz
die() {
  echo "fuzz.sh: FAILED: $*" >&2
  echo "fuzz.sh: the fuzzers need clang-14 and its sanitizer/libFuzzer runtime (Debian: clang-14" \
       "libclang-rt-14-dev, installed by scripts/install-deps.sh)" >&2
  exit 2
}

# --- toolchain: fail loudly, never skip -------------------------------------------------------
CXX_BIN="${FUZZ_CXX:-}"
if [ -z "$CXX_BIN" ]; then
  if command -v clang++-14 >/dev/null 2>&1; then CXX_BIN=clang++-14; else CXX_BIN=clang++; fi
fi
command -v "$CXX_BIN" >/dev/null 2>&1 || die "compiler '$CXX_BIN' not found"
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
printf '#include <cstdint>\n#include <cstddef>\nextern "C" int LLVMFuzzerTestOneInput(const uint8_t*, size_t) { return 0; }\n' \
  > "$probe/probe.cpp"
"$CXX_BIN" -fsanitize=fuzzer,address,undefined "$probe/probe.cpp" -o "$probe/probe" 2>"$probe/err" ||
  { cat "$probe/err" >&2; die "'$CXX_BIN -fsanitize=fuzzer,address,undefined' cannot build a fuzzer (libFuzzer or sanitizer runtime missing)"; }
"$probe/probe" -runs=1 >/dev/null 2>&1 || die "a probe fuzzer built by $CXX_BIN does not run"

# --- build ----------------------------------------------------------------------------------
gen=()
command -v ninja >/dev/null 2>&1 && [ ! -f "$BUILD/CMakeCache.txt" ] && gen=(-G Ninja)
CXX="$CXX_BIN" cmake -S fuzz -B "$BUILD" "${gen[@]}" -DCMAKE_CXX_COMPILER="$CXX_BIN" >/dev/null ||
  die "cmake could not configure fuzz/ with $CXX_BIN"
build_targets=()
for t in "${targets[@]}"; do build_targets+=(--target "fuzz_$t"); done
cmake --build "$BUILD" -j"${FUZZ_JOBS:-2}" "${build_targets[@]}" || die "the fuzz harnesses did not build"

# --- seed corpora -----------------------------------------------------------------------------
if [ "$smoke" = 1 ]; then
  corpus_root="$BUILD/corpus-smoke"
  rm -rf "$corpus_root"  # a fresh corpus and a fixed seed: the same inputs every smoke run
else
  corpus_root="$BUILD/corpus"
fi
/usr/bin/python3 fuzz/make_corpus.py "$corpus_root" "${targets[@]}" >/dev/null || die "fuzz/make_corpus.py failed"

# --- run --------------------------------------------------------------------------------------
export UBSAN_OPTIONS="print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
mkdir -p "$BUILD/logs"
found=0
summary=()
for t in "${targets[@]}"; do
  findings="$BUILD/findings/$t"
  mkdir -p "$findings" "$corpus_root/$t"
  log="$BUILD/logs/$t.log"
  opts=(-max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len="${MAX_LEN[$t]}"
        -print_final_stats=1 -artifact_prefix="$findings/")
  [ -n "${DICT[$t]:-}" ] && opts+=(-dict="fuzz/dicts/${DICT[$t]}.dict")
  [ "$smoke" = 1 ] && opts+=(-seed=1)
  echo "== fuzz_$t: ${seconds} s ($log)"
  set +e
  # In the background to know its pid; a background job ignores Ctrl-C, so pass it on as TERM.
  "$BUILD/fuzz_$t" "${opts[@]}" "$corpus_root/$t" >"$log" 2>&1 &
  pid=$!
  # A harness that crashed leaves its scratch file (fuzz/fuzz_input.h) behind.
  scratch=("/dev/shm/dflash-fuzz-$pid.bin" "/tmp/dflash-fuzz-$pid.bin")
  trap 'kill -TERM "$pid" 2>/dev/null; wait "$pid"; rm -f "${scratch[@]}"; exit 130' INT TERM
  wait "$pid"
  rc=$?
  trap - INT TERM
  set -e
  rm -f "${scratch[@]}"
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  [ -n "$execs" ] || execs=$(grep -o '^#[0-9]\+' "$log" | tail -1 | tr -d '#')
  [ -n "$execs" ] || execs=0
  corpus_n=$(find "$corpus_root/$t" -type f | wc -l)
  kind=""
  if grep -q 'libFuzzer: run interrupted' "$log"; then
    echo "fuzz.sh: fuzz_$t was interrupted (after $execs executions)" >&2
    exit 130
  fi
  if grep -q 'ERROR: libFuzzer: timeout' "$log"; then kind="TIMEOUT"
  elif grep -q 'ERROR: LeakSanitizer' "$log"; then kind="LEAK"
  elif grep -q -e 'ERROR: libFuzzer: out-of-memory' -e 'ERROR: libFuzzer: malloc' "$log"; then kind="OUT-OF-MEMORY"
  elif [ "$rc" -ne 0 ] || grep -q -e '==ERROR:' -e 'runtime error:' -e 'deadly signal' "$log"; then kind="CRASH"
  fi
  if [ -z "$kind" ]; then
    line=$(printf '%-15s %10s executions  corpus %5s  no findings' "$t" "$execs" "$corpus_n")
  else
    found=1
    what=$(grep -m1 -e '^SUMMARY: ' -e 'runtime error:' -e "terminate called after throwing" "$log" || true)
    # An exception that escaped: its message says more than its type.
    case "$what" in "terminate called"*) what="$what, $(grep -m1 -o 'what(): .*' "$log" || true)" ;; esac
    artifact=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -1)
    line=$(printf '%-15s %10s executions  corpus %5s  %s: %s -> %s (log %s)' "$t" "$execs" "$corpus_n" \
           "$kind" "${what:-exit code $rc}" "${artifact:-no input saved}" "$log")
  fi
  echo "$line"
  summary+=("$line")
done

echo
echo "fuzz summary (${seconds} s per target$([ "$smoke" = 1 ] && echo ', smoke, -seed=1')):"
printf '  %s\n' "${summary[@]}"
if [ "$found" = 1 ]; then
  echo "fuzz.sh: FINDINGS: reproduce one with build-fuzz/fuzz_<target> <input>; see docs/fuzzing.md" >&2
  exit 1
fi
