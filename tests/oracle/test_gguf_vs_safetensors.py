#!/usr/bin/python3
"""GGUF written by `dflash convert` gives the logits of the same weights read from the
Hugging Face folder, bit for bit:
  bf16 GGUF (--weights native)  ==  folder --weights bf16
  q8_0 GGUF (--weights native)  ==  folder --weights q8      (same quantizer, same blocks)
  q4_0 GGUF (--weights native)  ==  folder --weights q4
and a GGUF converted at load (bf16 GGUF with --weights q8) == folder --weights q8.
Covers qwen3 (q/k norm), qwen2 (biases, tied), llama (q/k rows reordered the llama.cpp way
in the file and restored at load), GQA, head_dim != hidden/heads, tied and untied heads, yarn.
llama3 rope scaling travels as rope_freqs divisors in float32, so that case is compared with
a tolerance instead (the divisors round the frequencies to float).
Also checks the GGUF's hyper-parameters through `dflash generate --json` (same greedy ids).
"""
import os
import subprocess
import sys
import tempfile

import numpy as np

SRC = os.environ.get("DFLASH_SOURCE_DIR") or os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(SRC, "tools"))
from make_model import make_model  # noqa: E402
import gguf_io  # noqa: E402

BIN = os.environ.get("DFLASH_BIN") or os.path.join(SRC, "build", "dflash")
PROMPT = ",".join(str((i * 37 + 11) % 500) for i in range(24))

SHAPES = [
    ("qwen3_gqa_hd64_untied", dict(arch="qwen3", hidden=128, layers=2, heads=4, kv_heads=2, head_dim=64,
                                   ffn=384, vocab=512, tie=False), True),
    ("qwen3_tied_yarn", dict(arch="qwen3", hidden=128, layers=2, heads=2, kv_heads=1, head_dim=128, ffn=256,
                             vocab=512, tie=True, rope_theta=1e6,
                             rope_scaling={"rope_type": "yarn", "factor": 4.0,
                                           "original_max_position_embeddings": 2048}), True),
    ("qwen2_bias_tied", dict(arch="qwen2", hidden=128, layers=2, heads=4, kv_heads=1, head_dim=32, ffn=256,
                             vocab=512, tie=True), True),
    ("llama_gqa_untied", dict(arch="llama", hidden=128, layers=2, heads=4, kv_heads=2, head_dim=32, ffn=256,
                              vocab=512, tie=False), True),
    ("llama_llama3_rope", dict(arch="llama", hidden=128, layers=2, heads=2, kv_heads=2, head_dim=64, ffn=256,
                               vocab=512, tie=False,
                               rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                             "high_freq_factor": 4.0, "original_max_position_embeddings": 16}),
     False),
]
TYPES = [("bf16", "bf16"), ("q8_0", "q8"), ("q4_0", "q4")]


def run(*args):
    r = subprocess.run([BIN, *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit("FAIL: dflash %s\n%s" % (" ".join(args), r.stderr))
    return r.stdout


def logits(model, weights, out):
    run("logits", "--model", model, "--prompt-ids", PROMPT, "--weights", weights, "--out", out,
        "--threads", "2")
    return np.fromfile(out, dtype=np.float32)


def main():
    failures, checks = [], 0
    with tempfile.TemporaryDirectory() as tmp:
        for name, kw, exact in SHAPES:
            d = os.path.join(tmp, name)
            make_model(d, dtype="bf16", seed=3, **kw)
            ref = {w: logits(d, w, os.path.join(tmp, "ref.bin")) for _, w in TYPES}
            for gtype, w in TYPES:
                g = os.path.join(tmp, "%s.%s.gguf" % (name, gtype))
                run("convert", "--model", d, "--out", g, "--type", gtype)
                meta = gguf_io.parse(g)
                keys = {k for k, _, _ in meta.kv}
                for k in ("general.architecture", kw["arch"] + ".embedding_length", "tokenizer.ggml.tokens",
                          "tokenizer.ggml.merges", "tokenizer.ggml.pre"):
                    if k not in keys:
                        failures.append("%s %s: key %s missing" % (name, gtype, k))
                got = logits(g, "native", os.path.join(tmp, "got.bin"))
                checks += 1
                if exact:
                    if got.shape != ref[w].shape or not np.array_equal(got, ref[w]):
                        diff = np.abs(got - ref[w]).max() if got.shape == ref[w].shape else "shape"
                        failures.append("%s %s: GGUF logits differ from folder --weights %s (max %s)" %
                                        (name, gtype, w, diff))
                else:
                    rel = np.linalg.norm(got - ref[w]) / np.linalg.norm(ref[w])
                    if rel > 1e-4:
                        failures.append("%s %s: relative difference %.2e > 1e-4" % (name, gtype, rel))
                if gtype == "bf16":  # conversion at load from a GGUF matches conversion from the folder
                    got8 = logits(g, "q8", os.path.join(tmp, "got8.bin"))
                    checks += 1
                    if exact and not np.array_equal(got8, ref["q8"]):
                        failures.append("%s: bf16 GGUF --weights q8 != folder --weights q8" % name)
                    gen = [run("generate", "--model", m, "--prompt-ids", PROMPT, "--max-tokens", "12",
                               "--temperature", "0", "--ignore-eos", "--weights", wt, "--json")
                           for m, wt in ((d, "bf16"), (g, "native"))]
                    import json
                    a, b = (json.loads(x)["ids"] for x in gen)
                    checks += 1
                    if a != b:
                        failures.append("%s: greedy ids differ: folder %s gguf %s" % (name, a, b))
            print("%-24s ok" % name if not failures else "%-24s ..." % name)
    for f in failures:
        print("FAIL:", f)
    print("%d checks, %d failures" % (checks, len(failures)))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
