#!/usr/bin/python3
"""Engine logits and greedy text vs the PyTorch reference (tools/reference) on random models.

Env: DFLASH_BIN (engine binary), DFLASH_SOURCE_DIR. For each shape below a random model is
written twice (stored f32-or-f16, and bf16) and the engine is run as
  dflash logits   --model DIR --prompt-ids ... --weights f32|bf16|q8|q4 [--chunk-size N --threads N] --out F
  dflash generate --model DIR --prompt-ids ... --max-tokens 64 --temperature 0 --weights f32 --json --ignore-eos
The reference runs in float64 on exactly the stored values (bf16/f16 upcast is exact), so every
difference is the engine's own rounding.
"""
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch

SRC = os.environ.get("DFLASH_SOURCE_DIR") or os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(SRC, "tools"))
from make_model import make_model  # noqa: E402
from reference.transformer import load_hf_folder  # noqa: E402

PROMPT_LEN, GEN_LEN = 40, 64
# f32: fp32 accumulation over <= 1024 terms per dot product, a few layers deep, gives relative
# errors ~1e-6..1e-5 of the logit scale; 1e-4 leaves room for a different summation order.
TOL_F32 = 1e-4
# bf16: the engine multiplies the very same bf16 values (upcast to fp32) as the reference, so
# only summation order differs, as for f32; 1e-3 (10x looser) also admits a bf16->fp32 path
# that, e.g., keeps fp32 partial sums in a different blocking, but not bf16 activations (~4e-3).
TOL_BF16 = 1e-3
# q8/q4: relative Frobenius error ||engine - ref|| / ||ref|| over all positions. Simulated
# block-32 absmax quantization of every matrix on these models gives 0.009-0.024 (8-bit) and
# 0.15-0.32 (4-bit); the bounds are ~2x that, far below the ~1.0+ a wrong kernel gives.
# Argmax must agree on >= 90% of positions (simulation: 97-100% for 8-bit, 95-100% for 4-bit).
QUANT_REL = {"q8": 0.05, "q4": 0.5}
QUANT_AGREE = 0.90

# Each shape covers several features; together: all three archs, GQA 1:1 / 3:1 / 4:1,
# head_dim 64 and 128 (also != hidden/heads), tied and untied, the three tensor prefixes, a
# nested text_config, sharding, llama3 and yarn rope scaling, f16 storage.
SHAPES = [
    ("qwen3_mha_hd64", dict(arch="qwen3", hidden=128, layers=2, heads=4, kv_heads=4, head_dim=64,
                            ffn=384, vocab=512, tie=False)),
    ("qwen3_gqa4_hd128_tied_yarn_nested", dict(
        arch="qwen3", hidden=256, layers=3, heads=8, kv_heads=2, head_dim=128, ffn=1024,
        vocab=1024, tie=True, prefix="model.language_model.", nest_text_config=True,
        rope_theta=1e6, rope_scaling={"rope_type": "yarn", "factor": 4.0,
                                      "original_max_position_embeddings": 2048})),
    ("qwen2_gqa4_tied_sharded", dict(arch="qwen2", hidden=256, layers=2, heads=4, kv_heads=1,
                                     head_dim=64, ffn=768, vocab=768, tie=True, shards=3)),
    ("llama_mha_hd128_llama3", dict(
        arch="llama", hidden=256, layers=3, heads=2, kv_heads=2, head_dim=128, ffn=512,
        vocab=1024, tie=False, rope_scaling={
            "rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
            "high_freq_factor": 4.0, "original_max_position_embeddings": 64})),
    ("llama_gqa4_f16_lmprefix", dict(arch="llama", hidden=128, layers=2, heads=8, kv_heads=2,
                                     head_dim=64, ffn=384, vocab=600, tie=False, dtype="f16",
                                     prefix="language_model.model.")),
    ("qwen2_gqa3_untied", dict(arch="qwen2", hidden=192, layers=2, heads=3, kv_heads=1,
                               head_dim=64, ffn=512, vocab=640, tie=False, rope_theta=1e6)),
]
# Extra runs of the f32 logits with chunked prefill and threads (must match the same bound).
CHUNKED = {"qwen3_mha_hd64": (7, 2), "qwen3_gqa4_hd128_tied_yarn_nested": (16, 2)}

n_pass = n_fail = 0


def report(ok, name, detail):
    global n_pass, n_fail
    n_pass, n_fail = n_pass + ok, n_fail + (not ok)
    print(f"{'PASS' if ok else 'FAIL'} {name}: {detail}", flush=True)


def find_bin():
    b = os.environ.get("DFLASH_BIN")
    if not b:
        b = os.path.join(os.environ.get("DFLASH_BUILD_DIR", os.path.join(SRC, "build")), "dflash")
    return b


def run_engine(args, timeout=120):
    p = subprocess.run([BIN] + args, capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        raise RuntimeError(f"exit {p.returncode}: {p.stderr.strip()[-500:]}")
    return p.stdout


def parse_json(stdout):
    try:
        return json.loads(stdout)
    except ValueError:
        lines = [l for l in stdout.splitlines() if l.strip().startswith("{")]
        return json.loads(lines[-1])


def engine_logits(model_dir, ids, weights, vocab, tmp, extra=()):
    out = os.path.join(tmp, "logits.bin")
    info = parse_json(run_engine(["logits", "--model", model_dir, "--prompt-ids",
                                  ",".join(map(str, ids)), "--weights", weights, "--out", out,
                                  *extra]))
    if info.get("n_tokens") != len(ids) or info.get("vocab") != vocab:
        raise RuntimeError(f"engine reported {info}, want n_tokens={len(ids)} vocab={vocab}")
    arr = np.fromfile(out, dtype="<f4")
    if arr.size != len(ids) * vocab:
        raise RuntimeError(f"{arr.size} floats in --out file, want {len(ids) * vocab}")
    return torch.from_numpy(arr.astype(np.float64)).view(len(ids), vocab)


def argmax_mismatches(eng, ref, tol_abs):
    """Positions whose argmax differs, split into real ones and near-ties (the reference's own
    margin between the two tokens is within the comparison tolerance, so either is right)."""
    ea, ra = eng.argmax(-1), ref.argmax(-1)
    real, ties = [], []
    for t in torch.nonzero(ea != ra).flatten().tolist():
        margin = (ref[t, ra[t]] - ref[t, ea[t]]).item()
        (ties if margin <= 2 * tol_abs else real).append((t, margin))
    return real, ties


def check_close(name, eng, ref, rel_tol):
    scale = ref.abs().max().item()
    diff = (eng - ref).abs().max().item()
    real, ties = argmax_mismatches(eng, ref, rel_tol * scale)
    ok = diff <= rel_tol * scale and not real
    note = f" near-ties {ties}" if ties else ""
    report(ok, name, f"max|diff|={diff:.3g} max|logit|={scale:.3g} (tol {rel_tol:g}*max), "
                     f"argmax mismatches {[t for t, _ in real]}{note}")


def check_quant(name, eng, ref, q):
    rel = ((eng - ref).norm() / ref.norm()).item()
    agree = (eng.argmax(-1) == ref.argmax(-1)).double().mean().item()
    ok = rel <= QUANT_REL[q] and agree >= QUANT_AGREE
    report(ok, name, f"rel err {rel:.4f} (<= {QUANT_REL[q]}), argmax agreement {agree:.3f} "
                     f"(>= {QUANT_AGREE})")


def check_greedy(name, model_dir, model, prompt):
    """Engine greedy ids must equal the reference's. The one allowed exception is a step where
    the reference's own margin between the two tokens is within the f32 logit tolerance: then
    either choice is correct and the texts legitimately part (never seen with these seeds)."""
    want = model.greedy(prompt, GEN_LEN)
    res = parse_json(run_engine(["generate", "--model", model_dir, "--prompt-ids",
                                 ",".join(map(str, prompt)), "--max-tokens", str(GEN_LEN),
                                 "--temperature", "0", "--weights", "f32", "--json",
                                 "--ignore-eos"]))
    got = [int(i) for i in res["ids"]]
    if got == want:
        report(True, name, f"{GEN_LEN} tokens identical")
        return
    k = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
    detail = f"first difference at step {k} of {len(got)}/{len(want)}: engine {got[k:k + 5]} ref {want[k:k + 5]}"
    if k < min(len(got), len(want)):
        with torch.no_grad():
            z = model(torch.tensor([list(prompt) + want[:k]]))[0, -1]
        margin = (z[want[k]] - z[got[k]]).item()
        if margin <= 2 * TOL_F32 * z.abs().max().item():
            report(True, name, detail + f" (reference near-tie, margin {margin:.3g})")
            return
        detail += f", reference margin {margin:.3g}"
    report(False, name, detail)


def test_shape(name, spec, tmp):
    spec = dict(spec)
    base_dtype = spec.pop("dtype", "f32")
    d32, d16 = os.path.join(tmp, name), os.path.join(tmp, name + "_bf16")
    cfg = make_model(d32, seed=11, dtype=base_dtype, **spec)
    make_model(d16, seed=11, dtype="bf16", **spec)
    V = cfg.vocab_size
    g = torch.Generator().manual_seed(sum(map(ord, name)))
    prompt = torch.randint(0, V - 3, (PROMPT_LEN,), generator=g).tolist()
    _, ref_model = load_hf_folder(d32, torch.float64)
    _, ref16_model = load_hf_folder(d16, torch.float64)
    with torch.no_grad():
        ref = ref_model(torch.tensor([prompt]))[0]
        ref16 = ref16_model(torch.tensor([prompt]))[0]

    def guarded(label, fn):
        try:
            fn()
        except Exception as e:  # an engine failure is one failed check, not a crash
            report(False, f"{name} {label}", f"{type(e).__name__}: {e}")

    guarded("f32 logits", lambda: check_close(
        f"{name} f32 logits ({base_dtype} stored)",
        engine_logits(d32, prompt, "f32", V, tmp), ref, TOL_F32))
    if name in CHUNKED:
        cs, th = CHUNKED[name]
        guarded("chunked", lambda: check_close(
            f"{name} f32 logits --chunk-size {cs} --threads {th}",
            engine_logits(d32, prompt, "f32", V, tmp,
                          ["--chunk-size", str(cs), "--threads", str(th)]), ref, TOL_F32))
    guarded("bf16 logits", lambda: check_close(
        f"{name} bf16 logits", engine_logits(d16, prompt, "bf16", V, tmp), ref16, TOL_BF16))
    for q in ("q8", "q4"):
        guarded(f"{q} logits", lambda: check_quant(
            f"{name} {q} logits", engine_logits(d32, prompt, q, V, tmp), ref, q))
    guarded("greedy", lambda: check_greedy(f"{name} greedy {GEN_LEN}", d32, ref_model, prompt))


def main():
    global BIN
    torch.manual_seed(0)
    torch.set_num_threads(1)
    BIN = find_bin()
    if not os.access(BIN, os.X_OK):
        print(f"FAIL engine binary not found: {BIN}")
        print("0 passed, 1 failed")
        return 1
    t0 = time.time()
    with tempfile.TemporaryDirectory(prefix="dflash_oracle_") as tmp:
        for name, spec in SHAPES:
            test_shape(name, spec, tmp)
    print(f"({time.time() - t0:.1f} s)")
    print(f"{n_pass} passed, {n_fail} failed")
    return 1 if n_fail else 0


if __name__ == "__main__":
    sys.exit(main())
