#!/usr/bin/python3
"""llama.cpp as a second oracle for the Qwen3.5 hybrids: random Qwen3.5 folders
(tools/make_qwen35.py) converted by `dflash convert --type f32` to GGUF qwen35 are continued
greedily by dflash (`dflash generate --model F.gguf`) and by llama.cpp (node-llama-cpp 3.22.1's
prebuilt CPU library, `node tools/bench/llamacpp_peer.mjs continue`) from the same prompt ids.

This checks the file as llama.cpp reads it (metadata keys, tensor names and shapes, value heads
tiled, norms stored + 1, ssm_a = -exp(A_log), the conv as [K, C]) and dflash's forward against
an independent implementation (llama.cpp runs the chunked Gated DeltaNet and its own attention).
With f32 weights llama.cpp multiplies in f32 but sums in other orders, so a genuine near-tie may
flip: the ids must be equal up to the first generated position where dflash's top-2 logit
margin (from `dflash logits` on prompt + continuation) is below MARGIN, and at least
MIN_COMPARED positions must be compared in every case, so the test cannot pass vacuously.
Shapes: A text-only, nk=2 != nv=4 (tiled heads), non-periodic layer types
(attention.recurrent_layers); B multimodal, nk=nv=2, full attention every 2nd layer; C nk=2,
nv=6 (3 value heads per key head). All untied: a tied random head gives small logits with
many near-ties (see test_qwen35_vs_torch.py), which would leave too few clear positions.
node-llama-cpp missing is a failure (scripts/install-deps.sh installs it), not a skip.
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

SRC = os.environ.get("DFLASH_SOURCE_DIR") or os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(SRC, "tools"))
from make_qwen35 import make_qwen35  # noqa: E402

BIN = os.environ.get("DFLASH_BIN") or os.path.join(SRC, "build", "dflash")
PEER = os.path.join(SRC, "tools", "bench", "llamacpp_peer.mjs")
NPM = ("npm install --ignore-scripts --omit=optional node-llama-cpp@3.22.1 "
       "@node-llama-cpp/linux-x64@3.22.1")
N_TOKENS = 32      # generated per case
MIN_COMPARED = 16  # positions that must be compared (and equal) in every case
MARGIN = 0.02      # logits: below this top-2 gap at dflash's argmax, the engines may differ
COMMON = dict(hidden=128, heads=4, kv_heads=2, head_dim=32, ffn=256, vocab=384, dtype="f32")
SHAPES = [
    ("A_nk2_nv4_untied", dict(form="causal-lm", tie=False, layers=4, layer_types="L,F,L,L", linear_key_heads=2,
                              linear_value_heads=4, linear_key_dim=32, linear_value_dim=32, seed=11, **COMMON)),
    ("B_nk2_nv2_multimodal", dict(form="multimodal", tie=False, layers=4, full_every=2, linear_key_heads=2,
                                  linear_value_heads=2, linear_key_dim=32, linear_value_dim=32, seed=12, **COMMON)),
    ("C_nk2_nv6", dict(form="causal-lm", tie=False, layers=4, full_every=4, linear_key_heads=2,
                       linear_value_heads=6, linear_key_dim=32, linear_value_dim=32, seed=13, **COMMON)),
]
failures, summary = [], []


def run(cmd, timeout=600):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        raise SystemExit("FAIL: %s\n%s%s" % (" ".join(cmd), r.stdout, r.stderr))
    return r.stdout


def check(what, ok, detail=""):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what + ("\n  " + detail if detail else ""))


def require_peer():
    nm = os.path.join(SRC, "node_modules")
    missing = [p for p in ("node-llama-cpp", os.path.join("@node-llama-cpp", "linux-x64"))
               if not os.path.isfile(os.path.join(nm, p, "package.json"))]
    if missing:
        raise SystemExit("FAIL: %s not installed in %s; run in %s: %s" % (", ".join(missing), nm, SRC, NPM))


def margins(gguf, ids, tmp):
    """dflash's top-1 minus top-2 logit and argmax at every position of ids."""
    out = os.path.join(tmp, "logits.f32")
    meta = json.loads(run([BIN, "logits", "--model", gguf, "--prompt-ids", ",".join(map(str, ids)),
                           "--weights", "native", "--threads", "2", "--out", out]))
    lg = np.fromfile(out, dtype=np.float32).reshape(meta["n_tokens"], meta["vocab"])
    top2 = np.sort(lg, axis=1)[:, -2:]
    return top2[:, 1] - top2[:, 0], lg.argmax(axis=1)


def compare(label, gguf, prompt, tmp):
    p = ",".join(map(str, prompt))
    d = json.loads(run([BIN, "generate", "--model", gguf, "--prompt-ids", p, "--max-tokens", str(N_TOKENS),
                        "--weights", "native", "--ignore-eos", "--threads", "2", "--json"]))["ids"]
    ll = json.loads(run(["node", PEER, "continue", "--model", gguf, "--ids", p, "--n", str(N_TOKENS),
                         "--threads", "2"]).strip().splitlines()[-1])["ids"]
    if len(d) != N_TOKENS or len(ll) != N_TOKENS:
        check(label + " lengths", False, "dflash %d, llama.cpp %d ids" % (len(d), len(ll)))
        return
    m, am = margins(gguf, prompt + d[:-1], tmp)
    gen_m = m[len(prompt) - 1:]  # the margin at the position that produced d[i]
    check(label + ": dflash logits argmax == generate", list(am[len(prompt) - 1:]) == d)
    n = next((i for i, x in enumerate(gen_m) if x < MARGIN), N_TOKENS)
    first_diff = next((i for i in range(N_TOKENS) if d[i] != ll[i]), N_TOKENS)
    detail = ("dflash    %s\n  llama.cpp %s\n  first difference at %d (dflash margin there %.4f), first margin < %.2f "
              "at %d, smallest %.4f" % (d, ll, first_diff, gen_m[first_diff] if first_diff < N_TOKENS else float("nan"),
                                        MARGIN, n, float(gen_m.min())))
    line = ("%s: equal for %d/%d tokens, compared %d (margin >= %.2f), smallest margin compared %.3f, distinct ids %d"
            % (label, first_diff, N_TOKENS, n, MARGIN, float(gen_m[:n].min()) if n else float("nan"), len(set(d))))
    print("  " + line)
    summary.append(line)
    check(label + ": at least %d clear positions" % MIN_COMPARED, n >= MIN_COMPARED, detail)
    check(label + ": same greedy ids as llama.cpp", d[:n] == ll[:n], detail)
    check(label + ": continuation is not one repeated id", len(set(d[:n])) > 3, detail)


def main():
    require_peer()
    with tempfile.TemporaryDirectory() as tmp:
        for name, spec in SHAPES:
            folder = os.path.join(tmp, name)
            make_qwen35(folder, **spec)
            gguf = os.path.join(tmp, name + ".f32.gguf")
            run([BIN, "convert", "--model", folder, "--out", gguf, "--type", "f32"])
            for k, prompt in enumerate(([(i * 37 + 11) % 380 for i in range(12)],
                                        [(i * 101 + 7) % 380 for i in range(20)])):
                compare("%s prompt %d" % (name, k), gguf, prompt, tmp)
    for s in summary:
        print("summary:", s)
    for f in failures:
        print("FAIL:", f)
    print("%d failures" % len(failures))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
