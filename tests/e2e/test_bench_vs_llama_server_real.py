#!/usr/bin/python3
"""dflash bench --vs-llama-server with a real llama-server binary (llama.cpp's own DFlash), on a
grown pair (dflash graft, qwen3-graft-test): both engines run plain and at B=4, llama.cpp's
speculative text equals its plain text (greedy), and it accepts drafted tokens (the grown draft
is the trained demo draft, so acceptance is far from zero).

The binary is $DFLASH_LLAMA_SERVER (build it from node-llama-cpp's bundled llama.cpp source,
README "llama.cpp's own DFlash"). Where none is given this test exits 77, which ctest reports as
Skipped, after saying so loudly: it never passes without having run.
"""
import json
import os
import subprocess
import sys
import tempfile

from harness import BIN, SRC, check, finish  # noqa: E402

server = os.environ.get("DFLASH_LLAMA_SERVER", "")
if not (server and os.path.isfile(server) and os.access(server, os.X_OK)):
    print("*** LLAMA-SERVER NOT EXERCISED: set DFLASH_LLAMA_SERVER to a llama-server binary to run this test "
          "(got " + repr(server) + ") ***", flush=True)
    sys.exit(77)

with tempfile.TemporaryDirectory() as tmp:
    pair = os.path.join(tmp, "pair")
    subprocess.run([BIN, "graft", "--shape", "qwen3-graft-test", "--out", pair], check=True, capture_output=True,
                   timeout=300)
    out = os.path.join(tmp, "bench.json")
    r = subprocess.run([BIN, "bench", "--model", os.path.join(pair, "target"), "--draft", os.path.join(pair, "draft"),
                        "--weights", "q4", "--n-prompts", "2",
                        "--prompts", os.path.join(SRC, "models", "demo", "bench_prompts.json"), "--bench-gen-tokens", "32", "--block-sizes", "4",
                        "--rounds", "1", "--long-prompt-tokens", "0", "--threads", "2", "--vs-llama-server", server,
                        "--json-out", out], capture_output=True, text=True, timeout=900)
    print(r.stdout)
    if check("the bench with llama-server exits 0", r.returncode == 0, r.stderr[-2000:]):
        runs = json.load(open(out))["llama_server"]["runs"]
        check("llama-server ran plain and at n_max 3", [x["n_max"] for x in runs] == [0, 3], str(runs)[:300])
        check("its speculative text equals its plain text", runs[1]["texts"] == runs[0]["texts"])
        check("it accepted drafted tokens", (runs[1]["accept_rate"] or 0) > 0.05, str(runs[1]["accept_rate"]))
        check("both engines measured a speed", all(x["tok_s"] > 0 for x in runs))
finish()
