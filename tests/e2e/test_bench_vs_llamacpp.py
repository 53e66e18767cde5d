#!/usr/bin/python3
"""`dflash bench --vs-llamacpp` end to end, on the tiny random shape in two rounds.

The run writes a random-weight GGUF per quantization, measures it in dflash and in llama.cpp
(node-llama-cpp, which scripts/install-deps.sh installs: missing is a failure, not a skip)
twice, in turn, and keeps each engine's best. Checked on the JSON it writes (--json-out):
one row per quantization with the fields the issue names; both engines measured every batch
size; each kept figure is the best of that engine's per-round figures (largest tok/s); the
ratios are dflash / llama.cpp of the kept figures; the roof fraction is the kept decode rate
times the bytes per token (weights, and the f16 KV cache read up to each decoded position, on
average) over the bandwidth (the best measured), and each round also records
its own bandwidth measurement and its decode's fraction of it; the SVG is written beside the
JSON.
"""
import json
import math
import os
import subprocess
import tempfile

from harness import BIN, check, finish  # noqa: E402

KS = ["1", "2", "4", "5", "8", "16", "32"]
ROUNDS = 2
PROMPT, GEN = 32, 16
# The tiny shape (src/bench/model_speed.cpp): 2 layers, 2 kv heads of 64; an f16 cache holds a key
# and a value row of 64 x 2 bytes per kv head, layer and position.
KV_BYTES_PER_POS = 2 * 2 * 2 * 64 * 2


def close(a, b, rel=1e-6):
    return math.isclose(a, b, rel_tol=rel, abs_tol=1e-9)


with tempfile.TemporaryDirectory() as tmp:
    out = os.path.join(tmp, "vs.json")
    r = subprocess.run([BIN, "bench", "--vs-llamacpp", "--shape", "tiny", "--threads", "2", "--prompt-tokens", str(PROMPT),
                        "--gen-tokens", str(GEN), "--rounds", str(ROUNDS), "--json-out", out],
                       capture_output=True, text=True, timeout=900, env=dict(os.environ, TMPDIR=tmp))
    if not check("bench --vs-llamacpp --rounds %d exits 0" % ROUNDS, r.returncode == 0, r.stderr[-3000:]):
        finish()
    check("the table names the rounds", "best of %d rounds per engine" % ROUNDS in r.stdout, r.stdout)
    check("the table prints each round's own roof", "measured just before each round" in r.stdout, r.stdout)
    rows = json.load(open(out))
    check("one row per quantization (q8_0, q4_0)", sorted(x["quant"] for x in rows) == ["q4_0", "q8_0"],
          str([x.get("quant") for x in rows]))
    for row in rows:
        q = row["quant"]
        d, l, per = row["dflash"], row["llamacpp"], row["per_round"]
        check(q + ": model, threads and rounds recorded",
              row["model"] == "tiny" and row["threads"] == 2 and row["rounds"] == ROUNDS and len(per) == ROUNDS,
              json.dumps({k: row.get(k) for k in ("model", "threads", "rounds")}))
        for eng, name in ((d, "dflash"), (l, "llamacpp")):
            for k in ("pp512_tok_s", "tg128_tok_s"):
                vals = [x[name][k] for x in per]
                check("%s %s: %s is the best of its rounds %s" % (q, name, k, vals),
                      all(v > 0 for v in vals) and close(eng[k], max(vals)), str(eng[k]))
            fw = eng["forward_ms"]
            check("%s %s: forward_ms for every batch size" % (q, name),
                  all(k in fw and fw[k] is not None and fw[k] > 0 for k in KS), json.dumps(fw))
        for k in ("pp512_tok_s", "tg128_tok_s"):
            check("%s: ratio %s = dflash / llama.cpp" % (q, k), close(row["ratio"][k], d[k] / l[k]),
                  "%s vs %s / %s" % (row["ratio"][k], d[k], l[k]))
        check(q + ": forward ratio per batch size = dflash / llama.cpp",
              all(close(row["ratio"]["forward_ms"][k], d["forward_ms"][k] / l["forward_ms"][k]) for k in KS),
              json.dumps(row["ratio"]["forward_ms"]))
        kv = KV_BYTES_PER_POS * (PROMPT + GEN / 2) / 1e9
        check(q + ": KV bytes per token = the f16 cache read at the average decoded position",
              close(row.get("kv_gb_per_token", -1), kv), "%s vs %s" % (row.get("kv_gb_per_token"), kv))
        gb = row["weight_gb_per_token"] + kv
        roof = d["tg128_tok_s"] * gb / row["bandwidth_gb_s"]
        check(q + ": roof fraction = decode x bytes per token / bandwidth", close(d["roof_fraction"], roof, 1e-3),
              "%s vs %s" % (d["roof_fraction"], roof))
        for i, x in enumerate(per):
            bw = x.get("bandwidth_gb_s", 0)
            check("%s round %d: its own bandwidth measurement, at most the best" % (q, i + 1),
                  0 < bw <= row["bandwidth_gb_s"] * (1 + 1e-9), "%s vs best %s" % (bw, row["bandwidth_gb_s"]))
            own = x["dflash"]["tg128_tok_s"] * gb / bw if bw > 0 else float("nan")
            check("%s round %d: roof fraction against that measurement" % (q, i + 1),
                  close(x["dflash"].get("roof_fraction", -1), own, 1e-3), "%s vs %s" % (x["dflash"], own))
        check(q + ": a bound for every batch size", all(row["bound_ms"][k] > 0 for k in KS), json.dumps(row["bound_ms"]))
    check("the SVG is written beside the JSON", os.path.getsize(os.path.join(tmp, "vs.svg")) > 0)
finish()
