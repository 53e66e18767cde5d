#!/usr/bin/python3
"""`dflash bench --schema`, the command that measures structured output's cost: on the shipped
Qwen3.5 demo pair it prints one row per decoding mode and, with --json, a document whose
numbers are consistent (tokens generated, the mask's time a small positive share of a step,
the warm round served from the mask cache); a file that is not JSON and a schema the grammar
compiler refuses end it with a message naming the problem and a non-zero exit. The figures
themselves are not asserted (timings), only that they are measured."""
import json
import math
import os
import subprocess
import tempfile

from harness import BIN, SRC, check, finish  # noqa: E402

SCHEMA = os.path.join(SRC, "tests", "data", "schemas", "person.json")
PAIR = ["--model", os.path.join(SRC, "models", "demo35", "target"), "--draft", os.path.join(SRC, "models", "demo35", "draft2")]

r = subprocess.run([BIN, "bench", "--schema", SCHEMA, *PAIR, "--gen-tokens", "24", "--threads", "2", "--json"],
                   capture_output=True, text=True, timeout=600)
check("bench --schema exits 0", r.returncode == 0, r.stderr[-2000:])
out = r.stdout
try:
    doc = json.loads(out)  # --json: stdout is the document alone, the table went to stderr
except ValueError:
    doc = {}
check("--json: stdout is one JSON document; the table is on stderr", bool(doc) and "free ms/t" in r.stderr, out[:300])
modes = doc.get("modes", {})
check("plain and speculative rows", set(modes) == {"plain", "speculative"}, str(modes.keys()))
for name, m in modes.items():
    fields = ["free_ms_per_token", "cold_ms_per_token", "warm_ms_per_token", "warm_mask_ms_per_token",
              "cold_mask_ms_per_token", "mask_share_of_step", "cold_mask_share_of_step"]
    finite = all(isinstance(m.get(f), (int, float)) and math.isfinite(m[f]) and m[f] >= 0 for f in fields)
    check(f"{name}: every figure a finite number >= 0", finite, json.dumps(m))
    check(f"{name}: the mask was timed (> 0) and at least 24 tokens generated",
          m.get("warm_mask_ms_per_token", 0) > 0 and m.get("tokens", 0) >= 24, json.dumps(m))
    check(f"{name}: the warm round was served from the cache (hits > misses)",
          m.get("cache_hits", 0) > m.get("cache_misses", 1) > 0, json.dumps(m))
    check(f"{name}: the row is printed (stderr under --json)", any(line.startswith(name) for line in r.stderr.splitlines()), r.stderr[-2000:])
check("the vocabulary is the demo's", doc.get("vocab") == 4032, str(doc.get("vocab")))

with tempfile.TemporaryDirectory() as tmp:
    bad = os.path.join(tmp, "bad.json")
    with open(bad, "w") as f:
        f.write("{not json")
    r = subprocess.run([BIN, "bench", "--schema", bad, *PAIR, "--gen-tokens", "4"], capture_output=True, text=True, timeout=300)
    check("a schema file that is not JSON: exit != 0, the file named", r.returncode != 0 and "bad.json" in r.stderr, r.stderr[-500:])
    refused = os.path.join(tmp, "refused.json")
    with open(refused, "w") as f:
        json.dump({"type": "string", "not": {"const": "a"}}, f)
    r = subprocess.run([BIN, "bench", "--schema", refused, *PAIR, "--gen-tokens", "4"], capture_output=True, text=True, timeout=300)
    check("a schema the compiler refuses: exit != 0, the keyword named", r.returncode != 0 and "not" in r.stderr, r.stderr[-500:])
finish()
