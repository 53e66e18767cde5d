#!/usr/bin/env python3
"""Old binary against new on the same machine, in alternating runs (A B B A per cycle).

    scripts/abba_bench.py --old /path/dflash-old --new build/dflash [--cycles 1] -- BENCH ARGS

Runs `BIN bench BENCH ARGS` four times per cycle in the order old, new, new, old, so that a
machine that drifts (thermal, other load) penalizes both alike. Each run writes its JSON
(--json-out, or stdout with --json); every number under a key that names a speed
(`*tok_s*`, higher is better) or a time (`*_ms*`, lower is better) is compared: the best of
each binary's runs, and new / old as a speed ratio (> 1: the new binary is faster), so a
time's ratio is old / new. Prints one line per metric and the geometric mean per kind.
Exits 0 (the numbers are for a reader to judge), or 1 with --max-slowdown F when a kind's
geometric mean is slower than 1 - F.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile


def leaves(x, path=""):
    if isinstance(x, dict):
        for k, v in x.items():
            yield from leaves(v, f"{path}.{k}" if path else str(k))
    elif isinstance(x, list):
        for i, v in enumerate(x):
            # Rows of a bench name themselves; use that instead of the index when present.
            tag = str(i)
            if isinstance(v, dict):
                tag = "/".join(str(v[k]) for k in ("model", "shape", "quant", "weights", "regime") if k in v) or tag
            yield from leaves(v, f"{path}[{tag}]")
    elif isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x):
        yield path, float(x)


def kind_of(path):
    last = path.split(".")[-1]
    # per_round entries repeat the best-of numbers; bounds and llama.cpp's numbers do not
    # depend on the binary under test.
    if any(w in path for w in ("per_round", "bound", "llamacpp", "peer", "ratio")):
        return None
    if "tok_s" in path:
        return "speed"
    if "forward_ms" in path or last.endswith("_ms"):
        return "time"
    return None


def run_once(binary, args):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "bench.json")
        argv = [binary, "bench", *args]
        if "--json" not in args:
            argv += ["--json-out", out]
        p = subprocess.run(argv, capture_output=True, text=True)
        if p.returncode != 0:
            sys.exit(f"abba: {' '.join(argv)} failed ({p.returncode}):\n{p.stderr[-3000:]}")
        doc = json.loads(p.stdout) if "--json" in args else json.load(open(out))
    return {k: v for k, v in leaves(doc) if kind_of(k)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--old", required=True)
    ap.add_argument("--new", required=True)
    ap.add_argument("--cycles", type=int, default=1)
    ap.add_argument("--max-slowdown", type=float, default=None,
                    help="exit 1 when a kind's geometric mean is slower than this fraction (e.g. 0.03)")
    ap.add_argument("bench_args", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    args = a.bench_args[1:] if a.bench_args[:1] == ["--"] else a.bench_args
    runs = {"old": [], "new": []}
    for c in range(a.cycles):
        for who in ("old", "new", "new", "old"):
            print(f"abba: cycle {c + 1}, {who}", file=sys.stderr, flush=True)
            runs[who].append(run_once(a.old if who == "old" else a.new, args))
    keys = sorted(set.intersection(*(set(r) for r in runs["old"] + runs["new"])))
    if not keys:
        sys.exit("abba: no speed or time figures in common between the runs")
    by_kind = {"speed": [], "time": []}
    print(f"{'metric':70s} {'old':>10s} {'new':>10s} {'new speed / old':>16s}")
    for k in keys:
        kind = kind_of(k)
        pick = max if kind == "speed" else min
        old = pick(r[k] for r in runs["old"])
        new = pick(r[k] for r in runs["new"])
        if old <= 0 or new <= 0:
            continue
        ratio = new / old if kind == "speed" else old / new
        by_kind[kind].append(ratio)
        print(f"{k[:70]:70s} {old:10.3f} {new:10.3f} {ratio:16.3f}")
    worst = 1.0
    for kind, rs in by_kind.items():
        if rs:
            g = math.exp(sum(math.log(r) for r in rs) / len(rs))
            worst = min(worst, g)
            print(f"geometric mean over {len(rs)} {kind} figures: new is {g:.3f}x the old speed "
                  f"(min {min(rs):.3f}, max {max(rs):.3f})")
    if a.max_slowdown is not None and worst < 1 - a.max_slowdown:
        sys.exit(1)


if __name__ == "__main__":
    main()
