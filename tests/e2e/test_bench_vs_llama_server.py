#!/usr/bin/python3
"""dflash bench --draft ... --vs-llama-server PATH: the plumbing, against a stand-in server.

- a path that is not an executable file, or the option without --draft, fails at once with a
  clear message, before dflash's own (long) measurement starts;
- on a grown pair (dflash graft, qwen3-graft-test) with fake_llama_server.py as the binary:
  the peer converts the pair to GGUF, starts the server once plain and once per block size
  (-md DRAFT.gguf --spec-type draft-dflash --spec-draft-n-max B-1, -t THREADS), sends the code
  prompts, and the bench prints both engines side by side and writes them to --json-out, with
  the server's figures as it reported them.
The real llama-server is test_bench_vs_llama_server_real.py's (skipped where none is built).
"""
import json
import os
import subprocess
import sys
import tempfile
import time

from harness import BIN, SRC, check, finish  # noqa: E402

FAKE = os.path.join(SRC, "tests", "e2e", "fake_llama_server.py")

with tempfile.TemporaryDirectory() as tmp:
    pair = os.path.join(tmp, "pair")
    subprocess.run([BIN, "graft", "--shape", "qwen3-graft-test", "--out", pair], check=True, capture_output=True,
                   timeout=300)
    target, draft = os.path.join(pair, "target"), os.path.join(pair, "draft")
    common = ["bench", "--model", target, "--draft", draft, "--weights", "q4", "--n-prompts", "2",
              "--prompts", os.path.join(SRC, "models", "demo", "bench_prompts.json"),
              "--bench-gen-tokens", "16", "--block-sizes", "4,8", "--rounds", "1", "--long-prompt-tokens", "0",
              "--threads", "2"]

    t0 = time.time()
    r = subprocess.run([BIN, *common, "--vs-llama-server", os.path.join(tmp, "no-such-llama-server")],
                       capture_output=True, text=True, timeout=120)
    check("a missing binary fails at once with a clear message",
          r.returncode != 0 and "not an executable file" in r.stderr and "regime" not in r.stdout
          and time.time() - t0 < 60, f"rc {r.returncode}, stderr {r.stderr[-300:]!r}")
    r = subprocess.run([BIN, "bench", "--model", target, "--vs-llama-server", FAKE], capture_output=True, text=True,
                       timeout=120)
    check("--vs-llama-server without --draft is refused", r.returncode != 0 and "needs --draft" in r.stderr,
          r.stderr[-300:])

    log = os.path.join(tmp, "fake.log")
    out = os.path.join(tmp, "bench.json")
    env = dict(os.environ, FAKE_LLAMA_SERVER_LOG=log)
    r = subprocess.run([BIN, *common, "--vs-llama-server", FAKE, "--json-out", out], capture_output=True, text=True,
                       timeout=900, env=env)
    if not check("the bench with the stand-in server exits 0", r.returncode == 0, r.stderr[-2000:]):
        finish()
    print(r.stdout)
    check("both engines are printed side by side", "side by side" in r.stdout and "llama-server" in r.stdout
          and "B=4" in r.stdout and "B=8" in r.stdout, r.stdout[-800:])
    doc = json.load(open(out))
    runs = doc.get("llama_server", {}).get("runs", [])
    check("one server run plain and one per block size (n_max = B - 1)", [x["n_max"] for x in runs] == [0, 3, 7],
          str([x.get("n_max") for x in runs]))
    want = {0: 100.0, 3: 175.0, 7: 275.0}
    check("the server's tok/s as it reported them (predicted_n / predicted_ms)",
          all(abs(x["tok_s"] - want[x["n_max"]]) < 1e-6 for x in runs), str([x["tok_s"] for x in runs]))
    check("acceptance from draft_n / draft_n_accepted", all(x["accept_rate"] == 0.5 for x in runs[1:])
          and runs[0]["accept_rate"] is None, str([x["accept_rate"] for x in runs]))
    check("two code prompts each", all(len(x["texts"]) == 2 for x in runs))
    starts = [json.loads(line) for line in open(log)]
    check("three server starts", len(starts) == 3, str(len(starts)))
    plain, *spec = starts
    check("plain decoding without a draft", "-md" not in plain and "--spec-type" not in plain, str(plain))
    check("speculative starts: the DFlash draft as GGUF, draft-dflash, n_max B - 1, 2 threads",
          all(a[a.index("-md") + 1].endswith(".gguf") and a[a.index("--spec-type") + 1] == "draft-dflash"
              and a[a.index("-t") + 1] == "2" for a in spec)
          and [a[a.index("--spec-draft-n-max") + 1] for a in spec] == ["3", "7"], str(spec))
    code = [x for x in doc["regimes"] if x["regime"] == "code"][0]
    check("dflash's own figures are in the same document", code["plain_tok_s"] > 0 and "4" in code["dflash"]
          and "8" in code["dflash"], str(code)[:300])
    table = r.stdout[r.stdout.index("side by side"):]
    row = {ln.split()[0]: ln.split() for ln in table.splitlines()[2:] if ln.strip()}
    check("the table's dflash columns are dflash's figures", row.get("plain", [""])[1] == f"{code['plain_tok_s']:.2f}"
          and row.get("B=4", [""])[1] == f"{code['dflash']['4']['tok_s']:.2f}"
          and row.get("B=8", ["", "", ""])[2] == f"{code['dflash']['8']['speedup']:.2f}x,", str(row))
finish()
