#!/usr/bin/python3
"""GGUF files written by `dflash convert` load in llama.cpp and give dflash's greedy text.

For a small random Qwen3 model (tools/make_model.py) and the shipped demo target, each of
bf16, q8_0 and q4_0 is converted with `dflash convert`, then the same prompt ids are continued
greedily by `dflash generate --model F.gguf --json` and by llama.cpp (node-llama-cpp's
prebuilt CPU library, `node tools/bench/llamacpp_peer.mjs continue`).

The two engines round activations differently (llama.cpp converts activations to bf16 for
bf16 weights and to q8_0 for q8_0/q4_0 weights), so a genuine near-tie may flip. The ids must
be equal up to the first generated position where dflash's top-2 logit margin (from
`dflash logits` on prompt + continuation) is below MARGIN; at least MIN_COMPARED positions
must be compared in every case, so the test cannot pass vacuously. node-llama-cpp missing is a
failure (scripts/install-deps.sh installs it), not a skip.
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

from harness import BIN, SRC, check, finish  # noqa: E402
sys.path.insert(0, os.path.join(SRC, "tools"))
from make_model import make_model  # noqa: E402

PEER = os.path.join(SRC, "tools", "bench", "llamacpp_peer.mjs")
NPM = ("npm install --ignore-scripts --omit=optional node-llama-cpp@3.22.1 "
       "@node-llama-cpp/linux-x64@3.22.1")
N_TOKENS = 24      # generated per case
MIN_COMPARED = 16  # positions that must be compared (and equal) in every case
MARGIN = 0.05      # logits: below this top-2 gap at dflash's argmax, the engines may differ
TYPES = ["bf16", "q8_0", "q4_0"]


def run(cmd, timeout=600):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        raise SystemExit("FAIL: %s\n%s%s" % (" ".join(cmd), r.stdout, r.stderr))
    return r.stdout


def require_peer():
    nm = os.path.join(SRC, "node_modules")
    missing = [p for p in ("node-llama-cpp", os.path.join("@node-llama-cpp", "linux-x64"))
               if not os.path.isfile(os.path.join(nm, p, "package.json"))]
    if missing:
        raise SystemExit("FAIL: %s not installed in %s; run in %s: %s"
                         % (", ".join(missing), nm, SRC, NPM))


def margins(gguf, ids, tmp):
    """dflash's top-1 minus top-2 logit at every position of ids."""
    out = os.path.join(tmp, "logits.f32")
    meta = json.loads(run([BIN, "logits", "--model", gguf, "--prompt-ids", ",".join(map(str, ids)),
                           "--weights", "native", "--threads", "2", "--out", out]))
    lg = np.fromfile(out, dtype=np.float32).reshape(meta["n_tokens"], meta["vocab"])
    top2 = np.sort(lg, axis=1)[:, -2:]
    return top2[:, 1] - top2[:, 0], lg.argmax(axis=1)


def compare(label, gguf, prompt, tmp):
    p = ",".join(map(str, prompt))
    d = json.loads(run([BIN, "generate", "--model", gguf, "--prompt-ids", p, "--max-tokens",
                        str(N_TOKENS), "--weights", "native", "--ignore-eos", "--threads", "2",
                        "--json"]))["ids"]
    lj = json.loads(run(["node", PEER, "continue", "--model", gguf, "--ids", p, "--n",
                         str(N_TOKENS), "--threads", "2"]).strip().splitlines()[-1])
    ll = lj["ids"]
    if len(d) != N_TOKENS or len(ll) != N_TOKENS:
        check(label + " lengths", False, "dflash %d, llama.cpp %d ids" % (len(d), len(ll)))
        return
    m, am = margins(gguf, prompt + d[:-1], tmp)
    gen_m = m[len(prompt) - 1:]  # margin at the position that produced d[i]
    # dflash generate and dflash logits agree (the margins belong to these ids).
    check(label + " dflash logits argmax == generate", list(am[len(prompt) - 1:]) == d,
          "%s vs %s" % (list(am[len(prompt) - 1:]), d))
    first_tie = next((i for i, x in enumerate(gen_m) if x < MARGIN), N_TOKENS)
    n = first_tie
    first_diff = next((i for i in range(N_TOKENS) if d[i] != ll[i]), N_TOKENS)
    detail = ("dflash %s\n  llama.cpp %s\n  first difference at %d (dflash margin there %.4f), "
              "first margin < %.2f at %d, smallest margin %.4f"
              % (d, ll, first_diff, gen_m[first_diff] if first_diff < N_TOKENS else float("nan"),
                 MARGIN, first_tie, float(gen_m.min())))
    print("  %s: equal for %d/%d tokens, compared %d, min margin %.3f"
          % (label, first_diff, N_TOKENS, n, float(gen_m[:n].min()) if n else float("nan")))
    check(label + " at least %d clear positions" % MIN_COMPARED, n >= MIN_COMPARED, detail)
    check(label + " same greedy ids as llama.cpp", d[:n] == ll[:n], detail)


def main():
    require_peer()
    with tempfile.TemporaryDirectory() as tmp:
        rnd = os.path.join(tmp, "qwen3_random")
        # make_model plants a bigram so that greedy margins are clear (median ~2 logit std).
        make_model(rnd, arch="qwen3", hidden=256, layers=2, heads=4, kv_heads=2, head_dim=64,
                   ffn=512, vocab=1024, tie=False, dtype="bf16", seed=7)
        demo = os.path.join(SRC, "models", "demo", "target")
        # The demo target is a trained model: a chat prompt like its training data gives
        # confident (clear-margin) greedy text; random ids would give near-ties.
        chat = ("<|im_start|>user\nWrite a Python function `b64encode` from the `base64` module."
                "<|im_end|>\n<|im_start|>assistant\n")
        demo_prompt = json.loads(run([BIN, "tokenize", "--model", demo, "--json", "--text", chat]))
        models = [("random-qwen3", rnd, [(i * 37 + 11) % 1000 for i in range(12)]),
                  ("demo-target", demo, demo_prompt)]
        for name, folder, prompt in models:
            for t in TYPES:
                gguf = os.path.join(tmp, "%s-%s.gguf" % (name, t))
                run([BIN, "convert", "--model", folder, "--out", gguf, "--type", t])
                compare("%s %s" % (name, t), gguf, prompt, tmp)
                os.remove(gguf)
    finish()


if __name__ == "__main__":
    main()
