#!/usr/bin/python3
"""A DFlash draft in llama.cpp's GGUF form (architecture "dflash", written by
tools/draft_gguf.py) gives exactly the logits of the same draft read from its folder.

  dflash draft-logits --model T --draft D(.gguf) --prompt-ids ... --block-first ID --weights W
  dflash generate --model T --draft D(.gguf) ... --temperature 0 --json

Checks, for each pair:
  - bf16 draft, --weights bf16 and f32: GGUF logits == folder logits bit for bit (same
    values, same kernels; the GGUF stores vectors as f32, which bf16 upcasts to exactly).
  - the file stores target_layer_ids + 1 (llama.cpp's convention) and dflash reads them
    back: a copy whose stored ids are NOT shifted (ids as z-lab writes them) gives
    different logits, so the subtraction is what makes the two equal.
  - speculative greedy decoding with the GGUF draft emits the folder draft's ids.
  - Q4_K / Q6_K matrices (where rows allow, as llama-quantize makes them): with --weights
    f32 the logits equal bit for bit those of a folder holding kquant.py's decoding of the
    same bytes, and natively (int8 kernels) they stay within NATIVE_REL of them.
  - a stored id of 0 (impossible after the + 1) is refused with a clear error.
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import shutil
import torch

SRC = os.environ.get("DFLASH_SOURCE_DIR") or os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(SRC, "tools"))
from make_model import make_model  # noqa: E402
from make_draft import make_draft  # noqa: E402
from draft_gguf import write_draft_gguf  # noqa: E402
import gguf_io  # noqa: E402
import kquant  # noqa: E402
from reference.safetensors_io import read_model_tensors, write_model_tensors  # noqa: E402

BIN = os.environ.get("DFLASH_BIN") or os.path.join(SRC, "build", "dflash")
PROMPT = ",".join(str((i * 29 + 5) % 400) for i in range(20))

# Native K-quant drafts vs their decoded f32 weights: only the int8 activations differ. These
# random drafts have deliberately peaky attention (make_draft's QK_GAIN), which amplifies
# that: measured 0.040 (q4_k) and 0.048 (q6_k); the same pair with the folder draft at
# --weights q8 (int8 activations and 8-bit weights) differs from f32 by 0.096.
NATIVE_REL = 0.1

PAIRS = [
    ("t4h256_d2_ids13_gqa", dict(arch="qwen3", hidden=256, layers=4, heads=4, kv_heads=2, head_dim=64, ffn=512,
                                 vocab=512, tie=True),
     dict(layers=2, block_size=8, target_layer_ids=[1, 3], heads=4, kv_heads=2, head_dim=64, ffn=512)),
    ("t3h128_d1_ids0_mha_b4", dict(arch="qwen3", hidden=128, layers=3, heads=4, kv_heads=4, head_dim=32, ffn=256,
                                   vocab=384, tie=False),
     dict(layers=1, block_size=4, target_layer_ids=[0, 2], heads=4, kv_heads=4, head_dim=32, ffn=256)),
]

n_pass = n_fail = 0


def report(ok, name, detail):
    global n_pass, n_fail
    n_pass, n_fail = n_pass + ok, n_fail + (not ok)
    print(f"{'PASS' if ok else 'FAIL'} {name}: {detail}", flush=True)


def run(*args, check=True):
    r = subprocess.run([BIN, *args], capture_output=True, text=True, timeout=300)
    if check and r.returncode != 0:
        raise RuntimeError(f"dflash {' '.join(args)}: {r.stderr.strip()[-400:]}")
    return r


def draft_logits(target, draft, weights, tmp):
    out = os.path.join(tmp, "dl.bin")
    run("draft-logits", "--model", target, "--draft", draft, "--prompt-ids", PROMPT, "--block-first", "7",
        "--weights", weights, "--out", out)
    return np.fromfile(out, dtype="<f4")


def greedy(target, draft, tmp):
    r = run("generate", "--model", target, "--draft", draft, "--prompt-ids", PROMPT, "--max-tokens", "24",
            "--temperature", "0", "--ignore-eos", "--weights", "f32", "--no-adaptive", "--json")
    lines = [l for l in r.stdout.splitlines() if l.strip().startswith("{")]
    return json.loads(lines[-1])["ids"]


def dequantized_folder(d, out, kind):
    """The draft folder with every matrix replaced by kquant.py's decoding of its bytes (f32)."""
    sd = read_model_tensors(d)
    for k, v in sd.items():
        v = v.to(torch.float32)
        if v.dim() == 2:
            v = torch.from_numpy(kquant.dequantize(kquant.quantize(v.numpy(), kind), v.shape[1], kind))
        sd[k] = v
    write_model_tensors(out, sd, dtype="f32")
    shutil.copy(os.path.join(d, "config.json"), os.path.join(out, "config.json"))
    return out


def check_pair(name, tkw, dkw, tmp):
    t = os.path.join(tmp, name + "_t")
    d = os.path.join(tmp, name + "_d")
    make_model(t, dtype="bf16", seed=21, **tkw)
    make_draft(t, d, dtype="bf16", seed=22, **dkw)
    g = write_draft_gguf(d, os.path.join(tmp, name + ".gguf"))
    ids = dkw["target_layer_ids"]
    stored = next(v for k, _, v in gguf_io.parse(g).kv if k == "dflash.target_layers")[1]
    report(stored == [i + 1 for i in ids], f"{name} stored target_layers", f"{stored} for z-lab ids {ids}")
    for w in ("bf16", "f32"):
        a, b = draft_logits(t, d, w, tmp), draft_logits(t, g, w, tmp)
        same = a.shape == b.shape and np.array_equal(a, b)
        detail = "" if same else f", max|diff| {np.abs(a - b).max() if a.shape == b.shape else 'shape'}"
        report(same, f"{name} --weights {w} GGUF == folder", f"{a.size} logits{detail}")
    unshifted = write_draft_gguf(d, os.path.join(tmp, name + "_unshifted.gguf"), target_layers=ids) \
        if min(ids) >= 1 else None
    if unshifted:
        a, b = draft_logits(t, d, "f32", tmp), draft_logits(t, unshifted, "f32", tmp)
        report(not np.array_equal(a, b), f"{name} ids read minus 1",
               f"unshifted ids {ids} in the file change the logits (max|diff| {np.abs(a - b).max():.3g})")
    a, b = greedy(t, d, tmp), greedy(t, g, tmp)
    report(a == b, f"{name} speculative greedy", f"{len(a)} ids identical" if a == b else f"folder {a} gguf {b}")
    if tkw["hidden"] % 256 == 0 and dkw["ffn"] % 256 == 0:
        for kind in ("q4_k", "q6_k"):
            q = write_draft_gguf(d, os.path.join(tmp, f"{name}_{kind}.gguf"), matrices=kind)
            dq = dequantized_folder(d, os.path.join(tmp, f"{name}_{kind}_dequantized"), kind)
            a, b = draft_logits(t, q, "f32", tmp), draft_logits(t, dq, "f32", tmp)
            report(np.array_equal(a, b), f"{name} {kind} draft --weights f32 == its decoded folder",
                   "bit for bit" if np.array_equal(a, b) else f"max|diff| {np.abs(a - b).max():.3g}")
            x = draft_logits(t, q, "native", tmp)
            rel = float(np.linalg.norm(x - b) / np.linalg.norm(b))
            report(bool(np.isfinite(x).all()) and rel < NATIVE_REL, f"{name} {kind} draft native",
                   f"relative difference to the decoded f32 draft {rel:.4f} (< {NATIVE_REL}: int8 activations only)")


def check_bad(tmp):
    t = os.path.join(tmp, "bad_t")
    d = os.path.join(tmp, "bad_d")
    make_model(t, dtype="bf16", seed=3, arch="qwen3", hidden=128, layers=3, heads=4, kv_heads=4, head_dim=32,
               ffn=256, vocab=384, tie=True)
    make_draft(t, d, dtype="bf16", seed=4, layers=1, block_size=4, target_layer_ids=[0, 2], heads=4, kv_heads=4,
               head_dim=32, ffn=256)
    g = write_draft_gguf(d, os.path.join(tmp, "bad0.gguf"), target_layers=[0, 2])
    r = run("draft-logits", "--model", t, "--draft", g, "--prompt-ids", PROMPT, "--block-first", "7",
            "--weights", "f32", "--out", os.devnull, check=False)
    line = r.stderr.strip()
    ok = r.returncode == 1 and "target_layers" in line and "bad0.gguf" in line and "at least 1" in line
    report(ok, "stored target layer id 0 refused", line[-300:])
    g = write_draft_gguf(d, os.path.join(tmp, "bad_range.gguf"), target_layers=[1, 4])
    r = run("draft-logits", "--model", t, "--draft", g, "--prompt-ids", PROMPT, "--block-first", "7",
            "--weights", "f32", "--out", os.devnull, check=False)
    line = r.stderr.strip()
    ok = r.returncode == 1 and "target layer id 3" in line and "bad_range.gguf" in line
    report(ok, "stored target layer id past the target refused", line[-300:])


def main():
    if not os.access(BIN, os.X_OK):
        print(f"FAIL engine binary not found: {BIN}")
        return 1
    with tempfile.TemporaryDirectory(prefix="dflash_gguf_draft_") as tmp:
        for name, tkw, dkw in PAIRS:
            try:
                check_pair(name, tkw, dkw, tmp)
            except Exception as e:
                report(False, name, f"{type(e).__name__}: {e}")
        try:
            check_bad(tmp)
        except Exception as e:
            report(False, "bad drafts", f"{type(e).__name__}: {e}")
    print(f"{n_pass} passed, {n_fail} failed")
    return 1 if n_fail else 0


if __name__ == "__main__":
    sys.exit(main())
