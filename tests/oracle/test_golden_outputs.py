#!/usr/bin/python3
"""The engine still gives its golden outputs bit for bit (tests/data/golden/README.md):
tools/golden.py check against tests/data/golden/golden.json.

  1. The SIMD target dispatch picks on this CPU (unheld; EMU128 held where that one has no
     goldens), in full: the converted GGUF files' SHA-256, every position's logits hash for
     3 models x 4 weights x 4 KV caches x decode, verify and prefill, and the greedy and
     speculative ids and accepted lengths. 1 thread per dflash run, 2 runs at once.
  2. The same target with 2 threads per run (the thread split must not change a bit) on three
     demo cells (bf16/f16 KV, q8/q8, q4/q4), logits only.
  3. Every other recorded target this CPU can hold (--simd-target), prefill logits only: AVX3
     and AVX2 on every cell, the slower SSE4 and EMU128 on the random pair's.
Any difference fails, naming the target, the config, the mode and the positions.
"""
import json
import os
import sys
import time

SRC = os.environ.get("DFLASH_SOURCE_DIR") or os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(SRC, "tools"))
import golden  # noqa: E402

BIN = os.environ.get("DFLASH_BIN") or os.path.join(SRC, "build", "dflash")


def check(*args):
    return golden.cmd_check(golden.parse_args(["check", "--bin", BIN, *args]))


def main():
    t0 = time.time()
    recorded = list(json.load(open(golden.GOLDEN))["targets"])
    native, held = golden.targets_of_cpu(BIN)
    first = native if native in recorded else "EMU128"
    runs = [check("--threads", "1", "--jobs", "2"),
            check("--threads", "2", "--jobs", "1", "--no-generate",
                  "--only", "demo/w-bf16/kv-f16,demo/w-q8/kv-q8,demo/w-q4/kv-q4")]
    for t in recorded:
        if t != first and t in held:
            runs.append(check("--threads", "1", "--jobs", "2", "--simd-target", t, "--modes", "prefill",
                              "--no-generate", *([] if t in ("AVX3", "AVX2") else ["--only", "random_pair"])))
    passed, failed = sum(r[0] for r in runs), sum(r[1] for r in runs)
    print("test_golden_outputs: %d passed, %d failed (%.0f s)" % (passed, failed, time.time() - t0))
    sys.exit(1 if failed or passed == 0 else 0)


if __name__ == "__main__":
    main()
