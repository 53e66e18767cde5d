#!/usr/bin/python3
"""Engine logits and greedy text of the Qwen3.5 hybrid family vs the PyTorch reference
(tools/reference/qwen35.py, sequential Gated DeltaNet) on random checkpoints.

Env: DFLASH_BIN, DFLASH_SOURCE_DIR. Shapes (tools/make_qwen35.py), each written with f32 and
with bf16 storage:
  A multimodal, untied, nk=2 nv=6, 8 layers (2 full), MTP block and a vision placeholder
  B text-only (causal-lm), tied, nk=nv=4
  C text-only, untied, nk=2 nv=4, dk=16 != dv=24, explicit non-periodic layer_types
  D multimodal, tied, nk=nv=2, partial_rotary_factor 0.5
Checks per shape: f32 logits (max|diff| <= 1e-4 * max|logit| against the float64 reference
on the stored values), bf16 (1e-3), q8/q4 (relative error and argmax agreement, as the dense
family's oracle), a 64-token greedy continuation equal to the reference's. Then: A in the other
checkpoint form, and A as an MLX conversion (prefix language_model.model., norms stored as
1 + w, conv [C, K, 1]) give bitwise the same logits as A. Last, Qwen3-Next's dense form
(nk=2 nv=6, fused in_proj_qkvz / in_proj_ba): bitwise the logits of the same weights in the
causal-lm form, f32 logits and a 64-token greedy continuation against the reference.
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
from make_qwen35 import make_qwen35  # noqa: E402
from reference.qwen35 import load_hf_folder  # noqa: E402
from reference.safetensors_io import read_safetensors, write_model_tensors  # noqa: E402

PROMPT_LEN, GEN_LEN = 40, 64
TOL_F32, TOL_BF16 = 1e-4, 1e-3
# q8/q4: the engine's error is compared with what block-32 absmax quantization of every
# streamed matrix does to the reference itself (simulated below, without the engine's int8
# activations, which add about half again at q8 and nothing visible at q4): relative error
# <= factor x the simulated one + slack, argmax agreement >= the simulated agreement - 0.15.
# A wrong kernel gives ~1.0+. (Tied shapes have small logits with much cancellation, so their
# quantization error is large for any correct engine.)
QUANT_BOUND = {"q8": (2.0, 0.01), "q4": (1.25, 0.02)}
AGREE_SLACK = 0.15

SHAPES = [
    ("A_mm_untied_nk2_nv6", dict(form="multimodal", linear_key_heads=2, linear_value_heads=6, layers=8,
                                 full_every=4, tie=False, mtp=True, visual_stub=True)),
    ("B_text_tied_nk4_nv4", dict(form="causal-lm", linear_key_heads=4, linear_value_heads=4, layers=4,
                                 full_every=2, tie=True)),
    ("C_text_untied_dk16_dv24", dict(form="causal-lm", linear_key_heads=2, linear_value_heads=4,
                                     linear_key_dim=16, linear_value_dim=24, layers=6,
                                     layer_types="L,F,L,L,F,L", tie=False)),
    ("D_mm_tied_rot05", dict(form="multimodal", linear_key_heads=2, linear_value_heads=2, layers=4,
                             full_every=4, tie=True, partial_rotary=0.5, head_dim=16, heads=2, kv_heads=1)),
]

n_pass = n_fail = 0


def report(ok, name, detail):
    global n_pass, n_fail
    n_pass, n_fail = n_pass + ok, n_fail + (not ok)
    print(f"{'PASS' if ok else 'FAIL'} {name}: {detail}", flush=True)


def run_engine(args, timeout=300):
    p = subprocess.run([BIN] + args, capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        raise RuntimeError(f"exit {p.returncode}: {p.stderr.strip()[-500:]}")
    return p


def parse_json(stdout):
    lines = [l for l in stdout.splitlines() if l.strip().startswith("{")]
    return json.loads(lines[-1])


def engine_logits(model_dir, ids, weights, vocab, tmp, extra=()):
    out = os.path.join(tmp, "logits.bin")
    info = parse_json(run_engine(["logits", "--model", model_dir, "--prompt-ids", ",".join(map(str, ids)),
                                  "--weights", weights, "--out", out, *extra]).stdout)
    if info.get("n_tokens") != len(ids) or info.get("vocab") != vocab:
        raise RuntimeError(f"engine reported {info}")
    arr = np.fromfile(out, dtype="<f4")
    return torch.from_numpy(arr.astype(np.float64)).view(len(ids), vocab)


def check_close(name, eng, ref, rel_tol):
    scale = ref.abs().max().item()
    diff = (eng - ref).abs().max().item()
    ea, ra = eng.argmax(-1), ref.argmax(-1)
    real = [t for t in torch.nonzero(ea != ra).flatten().tolist()
            if (ref[t, ra[t]] - ref[t, ea[t]]).item() > 2 * rel_tol * scale]
    report(diff <= rel_tol * scale and not real, name,
           f"max|diff|={diff:.3g} max|logit|={scale:.3g} (tol {rel_tol:g}*max), argmax mismatches {real}")


def quantize_rows(w, q):
    """GGUF Q8_0 / Q4_0 of a [rows, cols] tensor (blocks of 32 along cols, fp16 scales), decoded."""
    b = w.double().reshape(w.shape[0], -1, 32)
    if q == "q8":
        d = (b.abs().amax(-1, keepdim=True) / 127).half().double()
        x = torch.where(d > 0, torch.round(b / torch.where(d > 0, d, 1)), 0) * d
    else:
        idx = b.abs().argmax(-1, keepdim=True)
        d = (torch.gather(b, -1, idx) / -8).half().double()
        qv = torch.clamp(torch.floor(b / torch.where(d != 0, d, 1) + 8.5), 0, 15)
        x = torch.where(d != 0, (qv - 8) * d, 0)
    return x.reshape(w.shape)


def simulated_quant_logits(model, prompt, q):
    import copy
    m = copy.deepcopy(model)
    with torch.no_grad():
        for mod in m.modules():
            if isinstance(mod, torch.nn.Linear) and mod.weight.shape[1] % 32 == 0:
                mod.weight.copy_(quantize_rows(mod.weight, q))
        head = quantize_rows(m.output_weight().detach(), q)
        m.output_weight = lambda: head
        return m.forward(torch.tensor(prompt))


def check_quant(name, eng, ref, q, sim):
    rel = ((eng - ref).norm() / ref.norm()).item()
    agree = (eng.argmax(-1) == ref.argmax(-1)).double().mean().item()
    sim_rel = ((sim - ref).norm() / ref.norm()).item()
    sim_agree = (sim.argmax(-1) == ref.argmax(-1)).double().mean().item()
    max_rel, min_agree = QUANT_BOUND[q][0] * sim_rel + QUANT_BOUND[q][1], sim_agree - AGREE_SLACK
    report(rel <= max_rel and agree >= min_agree, name,
           f"rel err {rel:.4f} (<= {max_rel:.4f}; simulated {sim_rel:.4f}), argmax agreement {agree:.3f} "
           f"(>= {min_agree:.3f}; simulated {sim_agree:.3f})")


def check_greedy(name, model_dir, model, prompt):
    want = model.greedy(prompt, GEN_LEN)
    res = parse_json(run_engine(["generate", "--model", model_dir, "--prompt-ids", ",".join(map(str, prompt)),
                                 "--max-tokens", str(GEN_LEN), "--temperature", "0", "--weights", "f32",
                                 "--json", "--ignore-eos"]).stdout)
    got = [int(i) for i in res["ids"]]
    k = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), None)
    distinct = len(set(want))
    report(got == want and distinct > 3, name,
           f"{GEN_LEN} tokens identical ({distinct} distinct ids)" if got == want
           else f"first difference at {k}: engine {got[k:k + 5]} ref {want[k:k + 5]}")


def to_mlx(src, dst):
    """An MLX-style conversion of a text-only or multimodal folder: prefix language_model.model.,
    the five zero-centered norm kinds stored as 1 + w, conv1d as [C, K, 1], vision and MTP
    dropped, the head as language_model.lm_head.weight."""
    os.makedirs(dst, exist_ok=True)
    tensors = {}
    for fn in sorted(os.listdir(src)):
        if fn.endswith(".safetensors"):
            tensors.update(read_safetensors(os.path.join(src, fn)))
    out = {}
    for name, t in tensors.items():
        if name.startswith("mtp.") or name.startswith("model.visual."):
            continue
        if name == "lm_head.weight":
            out["language_model.lm_head.weight"] = t
            continue
        base = name.split("language_model.", 1)[1] if "language_model." in name else name[len("model."):]
        if base.endswith("conv1d.weight"):
            t = t.permute(0, 2, 1).contiguous()
        elif base.endswith("norm.weight") and "linear_attn.norm" not in base:
            t = (1.0 + t.float()).to(t.dtype)
        out["language_model.model." + base] = t
    write_model_tensors(dst, out, dtype=None)
    for fn in ("config.json", "generation_config.json"):
        with open(os.path.join(src, fn)) as f, open(os.path.join(dst, fn), "w") as g:
            g.write(f.read())


def test_shape(name, spec, tmp, prompt_seed):
    d32, d16 = os.path.join(tmp, name), os.path.join(tmp, name + "_bf16")
    cfg, ref_model, _ = make_qwen35(d32, dtype="f32", seed=7, **spec)
    _, ref16_model, _ = make_qwen35(d16, dtype="bf16", seed=7, **spec)
    V = cfg.vocab_size
    g = torch.Generator().manual_seed(prompt_seed)
    prompt = torch.randint(0, V - 3, (PROMPT_LEN,), generator=g).tolist()
    with torch.no_grad():
        ref = ref_model.forward(torch.tensor(prompt))
        ref16 = ref16_model.forward(torch.tensor(prompt))

    def guarded(label, fn):
        try:
            fn()
        except Exception as e:  # an engine failure is one failed check, not a crash
            report(False, f"{name} {label}", f"{type(e).__name__}: {e}")

    guarded("f32", lambda: check_close(f"{name} f32 logits", engine_logits(d32, prompt, "f32", V, tmp), ref, TOL_F32))
    guarded("f32 chunked", lambda: check_close(f"{name} f32 logits --chunk-size 7 --threads 2", engine_logits(
        d32, prompt, "f32", V, tmp, ["--chunk-size", "7", "--threads", "2"]), ref, TOL_F32))
    guarded("bf16", lambda: check_close(f"{name} bf16 logits (stored bf16, native)",
                                        engine_logits(d16, prompt, "native", V, tmp), ref16, TOL_BF16))
    for q in ("q8", "q4"):
        guarded(q, lambda: check_quant(f"{name} {q} logits", engine_logits(d32, prompt, q, V, tmp), ref, q,
                                       simulated_quant_logits(ref_model, prompt, q)))
    guarded("greedy", lambda: check_greedy(f"{name} greedy {GEN_LEN}", d32, ref_model, prompt))
    return d32, prompt, V


def test_forms(d32, spec, prompt, V, tmp):
    """The same weights in the other checkpoint form and as an MLX conversion: bitwise equal."""
    base = engine_logits(d32, prompt, "f32", V, tmp).numpy()
    other = dict(spec, form="causal-lm" if spec["form"] == "multimodal" else "multimodal")
    other.pop("visual_stub", None)
    d_other = os.path.join(tmp, "other_form")
    make_qwen35(d_other, dtype="f32", seed=7, **other)
    got = engine_logits(d_other, prompt, "f32", V, tmp).numpy()
    report(np.array_equal(base, got), f"{other['form']} form of A", "bitwise equal logits" if np.array_equal(
        base, got) else f"max|diff| {np.abs(base - got).max():.3g}")
    d_mlx = os.path.join(tmp, "mlx_form")
    to_mlx(d32, d_mlx)
    got = engine_logits(d_mlx, prompt, "f32", V, tmp).numpy()
    report(np.array_equal(base, got), "MLX conversion of A (norms hold 1+w, conv [C,K,1])",
           "bitwise equal logits" if np.array_equal(base, got) else f"max|diff| {np.abs(base - got).max():.3g}")


def test_qwen3_next(tmp):
    """Qwen3-Next's dense form (fmt §1.3: flat qwen3_next config, fused per-key-head grouped
    in_proj_qkvz / in_proj_ba) with nk != nv: the engine gives bitwise the logits of the same
    weights in the Qwen3.5 causal-lm form (f32, stored bf16 native, q8: the split rows are
    encoded as the separate tensors are), f32 logits within TOL_F32 of the reference reading the
    fused folder by its own unpacking, and the reference's 64-token greedy continuation."""
    spec = dict(linear_key_heads=2, linear_value_heads=6, layers=4, full_every=4, tie=False)
    d_next, d_sep = os.path.join(tmp, "next_f32"), os.path.join(tmp, "next_sep_f32")
    cfg, _, _ = make_qwen35(d_next, form="qwen3-next", dtype="f32", seed=11, **spec)
    make_qwen35(d_sep, form="causal-lm", dtype="f32", seed=11, **spec)
    with open(os.path.join(d_next, "config.json")) as f:
        assert json.load(f)["model_type"] == "qwen3_next"
    from reference.safetensors_io import read_model_tensors
    names = read_model_tensors(d_next)
    assert "model.layers.0.linear_attn.in_proj_qkvz.weight" in names, "qwen3-next form without fused tensors"
    assert "model.layers.0.linear_attn.in_proj_qkv.weight" not in names
    V = cfg.vocab_size
    prompt = torch.randint(0, V - 3, (PROMPT_LEN,), generator=torch.Generator().manual_seed(300)).tolist()
    for weights, dtype in (("f32", "f32"), ("native", "bf16"), ("q8", "f32")):
        a, b = d_next, d_sep
        if dtype == "bf16":
            a, b = d_next + "_bf16", d_sep + "_bf16"
            make_qwen35(a, form="qwen3-next", dtype="bf16", seed=11, **spec)
            make_qwen35(b, form="causal-lm", dtype="bf16", seed=11, **spec)
        x = engine_logits(a, prompt, weights, V, tmp).numpy()
        y = engine_logits(b, prompt, weights, V, tmp).numpy()
        report(np.array_equal(x, y), f"qwen3-next form nk=2 nv=6 ({dtype} stored, --weights {weights})",
               "bitwise equal to the causal-lm form" if np.array_equal(x, y)
               else f"max|diff| {np.abs(x - y).max():.3g} vs the causal-lm form")
    _, ref_model = load_hf_folder(d_next, torch.float64)
    with torch.no_grad():
        ref = ref_model.forward(torch.tensor(prompt))
    check_close("qwen3-next f32 logits vs reference", engine_logits(d_next, prompt, "f32", V, tmp), ref, TOL_F32)
    check_greedy(f"qwen3-next greedy {GEN_LEN}", d_next, ref_model, prompt)


def main():
    global BIN
    torch.manual_seed(0)
    torch.set_num_threads(1)
    BIN = os.environ.get("DFLASH_BIN") or os.path.join(os.environ.get("DFLASH_BUILD_DIR", os.path.join(SRC, "build")),
                                                       "dflash")
    if not os.access(BIN, os.X_OK):
        print(f"FAIL engine binary not found: {BIN}\n0 passed, 1 failed")
        return 1
    t0 = time.time()
    with tempfile.TemporaryDirectory(prefix="dflash_q35_") as tmp:
        first = None
        for i, (name, spec) in enumerate(SHAPES):
            r = test_shape(name, spec, tmp, 100 + i)
            first = first or (r, spec)
        try:
            (d32, prompt, V), spec = first
            test_forms(d32, spec, prompt, V, tmp)
        except Exception as e:
            report(False, "checkpoint forms", f"{type(e).__name__}: {e}")
        try:
            test_qwen3_next(tmp)
        except Exception as e:
            report(False, "qwen3-next form", f"{type(e).__name__}: {e}")
    print(f"({time.time() - t0:.1f} s)")
    print(f"{n_pass} passed, {n_fail} failed")
    return 1 if n_fail or n_pass == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
