#!/usr/bin/python3
"""Qwen3.5 hybrids through GGUF: `dflash convert` of a random Qwen3.5 folder
(tools/make_qwen35.py) writes a qwen35 GGUF whose logits, read back by dflash, equal the
folder's bit for bit:
  f32 folder -> f32 GGUF (--weights native)   ==  folder --weights f32
  bf16 folder -> bf16 GGUF (native)           ==  folder --weights bf16
  bf16 folder -> q8_0 / q4_0 GGUF (native)    ==  folder --weights q8 / q4 (same quantizer; a
                                                  value head is a whole number of 32-blocks, so
                                                  tiling moves blocks and requantizes nothing)
  bf16 GGUF with --weights q8                  ==  folder --weights q8 (conversion at load)
Shapes: A text-only, untied, nk=2 != nv=4 (value heads tiled in the file), dk=dv=32,
non-periodic layer types; B multimodal, tied, nk=nv=2; C nk=2, nv=6, dk=dv=16 (heads of half a
block: f32 and bf16 only, exact because those move element by element); A (f32) as an MLX
conversion (norms hold 1 + w, conv [C, K, 1]) converts to the same tensors as A.
Also: the metadata llama.cpp's qwen35 loader reads (ssm.*, recurrent_layers, rope sections,
norms stored + 1, ssm_a = -exp(A_log) in f32, conv ne [K, C] in f32), and greedy ids of
`dflash generate` equal for folder and file.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

SRC = os.environ.get("DFLASH_SOURCE_DIR") or os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(SRC, "tools"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_qwen35 import make_qwen35  # noqa: E402
import gguf_io  # noqa: E402
from test_qwen35_vs_torch import to_mlx  # noqa: E402

BIN = os.environ.get("DFLASH_BIN") or os.path.join(SRC, "build", "dflash")
PROMPT = ",".join(str((i * 37 + 11) % 380) for i in range(24))
COMMON = dict(hidden=64, heads=4, kv_heads=2, head_dim=32, vocab=384, ffn=128)
SHAPES = [
    # name, make_qwen35 arguments, GGUF types checked bitwise
    ("A_tiled_untied", dict(form="causal-lm", tie=False, layers=5, layer_types="L,F,L,L,F", linear_key_heads=2,
                            linear_value_heads=4, linear_key_dim=32, linear_value_dim=32, **COMMON),
     ["bf16", "q8_0", "q4_0"]),
    ("B_multimodal_tied", dict(form="multimodal", tie=True, layers=4, full_every=4, linear_key_heads=2,
                               linear_value_heads=2, linear_key_dim=32, linear_value_dim=32, **COMMON),
     ["bf16", "q8_0", "q4_0"]),
    ("C_half_block_heads", dict(form="causal-lm", tie=False, layers=4, full_every=2, linear_key_heads=2,
                                linear_value_heads=6, linear_key_dim=16, linear_value_dim=16, **COMMON),
     ["bf16"]),
]
WEIGHTS = {"bf16": "bf16", "q8_0": "q8", "q4_0": "q4", "f32": "f32"}
failures, checks = [], [0]


def run(*args):
    r = subprocess.run([BIN, *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit("FAIL: dflash %s\n%s" % (" ".join(args), r.stderr))
    return r.stdout


def logits(model, weights, tmp):
    out = os.path.join(tmp, "logits.bin")
    run("logits", "--model", model, "--prompt-ids", PROMPT, "--weights", weights, "--out", out, "--threads", "2")
    return np.fromfile(out, dtype=np.float32)


def check(ok, what):
    checks[0] += 1
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def same(label, got, want):
    diff = np.abs(got - want).max() if got.shape == want.shape else "shape %s vs %s" % (got.shape, want.shape)
    check(got.shape == want.shape and np.array_equal(got, want), "%s (max diff %s)" % (label, diff))


def check_metadata(name, g, spec):
    """The keys and stored forms llama.cpp's qwen35 loader reads (fmt §2.5)."""
    meta = gguf_io.parse(g)
    kv = {k: v for k, _, v in meta.kv}
    want = {"general.architecture": "qwen35", "qwen35.ssm.group_count": spec["linear_key_heads"],
            "qwen35.ssm.time_step_rank": spec["linear_value_heads"], "qwen35.ssm.state_size": spec["linear_key_dim"],
            "qwen35.ssm.inner_size": spec["linear_value_heads"] * spec["linear_value_dim"],
            "qwen35.ssm.conv_kernel": 4, "qwen35.rope.dimension_count": spec["head_dim"] // 4,
            "qwen35.block_count": spec["layers"], "qwen35.attention.key_length": spec["head_dim"]}
    bad = {k: (kv.get(k), v) for k, v in want.items() if kv.get(k) != v}
    check(not bad, "%s: hyper-parameters %s" % (name, bad or "as expected"))
    rec = kv.get("qwen35.attention.recurrent_layers")
    with open(os.path.join(SRC_DIRS[name], "config.json")) as f:
        cfg = json.load(f)
    types = cfg.get("text_config", cfg)["layer_types"]
    check(rec is not None and rec[1] == [int(t == "linear_attention") for t in types],
          "%s: recurrent_layers %s for %s" % (name, rec and rec[1], types))
    sections = kv.get("qwen35.rope.dimension_sections")
    check(sections is not None and len(sections[1]) == 4, "%s: rope.dimension_sections %s" % (name, sections))
    ts = {t.name: t for t in meta.tensors}
    lin = types.index("linear_attention")
    conv = ts.get("blk.%d.ssm_conv1d.weight" % lin)
    C = 2 * spec["linear_key_heads"] * spec["linear_key_dim"] + spec["linear_value_heads"] * spec["linear_value_dim"]
    check(conv is not None and conv.ne == [4, C] and conv.type == 0, "%s: conv ne %s type %s" %
          (name, conv and conv.ne, conv and conv.type))
    a = ts.get("blk.%d.ssm_a" % lin)
    vals = np.frombuffer(gguf_io.tensor_data(meta, a), dtype=np.float32) if a is not None and a.type == 0 else None
    check(vals is not None and (vals < 0).all(), "%s: ssm_a f32 and negative (-exp(A_log)): %s" % (name, vals))
    for n in ("blk.0.attn_norm.weight", "output_norm.weight", "blk.%d.ssm_norm.weight" % lin, "blk.%d.ssm_dt.bias" % lin):
        t = ts.get(n)
        check(t is not None and t.type == 0, "%s: %s stored f32" % (name, n))
    # Zero-centered norms hold 1 + w (w ~ N(0, 0.1)): around 1. The gated norm holds w itself (~1 too),
    # so the attn_norm mean tells the +1 apart only from a zero-mean w: check it is not near 0.
    an = np.frombuffer(gguf_io.tensor_data(meta, ts["blk.0.attn_norm.weight"]), dtype=np.float32)
    check(abs(an.mean() - 1) < 0.2, "%s: attn_norm stored as 1 + w (mean %.3f)" % (name, an.mean()))


SRC_DIRS = {}


def main():
    with tempfile.TemporaryDirectory() as tmp:
        for name, spec, types in SHAPES:
            d32, d16 = os.path.join(tmp, name + "_f32"), os.path.join(tmp, name)
            make_qwen35(d32, dtype="f32", seed=5, **spec)
            make_qwen35(d16, dtype="bf16", seed=5, **spec)
            SRC_DIRS[name] = d16
            g32 = os.path.join(tmp, name + ".f32.gguf")
            run("convert", "--model", d32, "--out", g32, "--type", "f32")
            same("%s: f32 GGUF native == f32 folder --weights f32" % name, logits(g32, "native", tmp),
                 logits(d32, "f32", tmp))
            ref = {}
            for t in types:
                g = os.path.join(tmp, "%s.%s.gguf" % (name, t))
                run("convert", "--model", d16, "--out", g, "--type", t)
                ref[t] = logits(d16, WEIGHTS[t], tmp)
                same("%s: %s GGUF native == folder --weights %s" % (name, t, WEIGHTS[t]), logits(g, "native", tmp),
                     ref[t])
                if t == "bf16":
                    check_metadata(name, g, spec)
                    if "q8_0" in types:
                        same("%s: bf16 GGUF --weights q8 == folder --weights q8" % name, logits(g, "q8", tmp),
                             logits(d16, "q8", tmp))
                    gen = [json.loads(run("generate", "--model", m, "--prompt-ids", PROMPT, "--max-tokens", "12",
                                          "--temperature", "0", "--ignore-eos", "--weights", w, "--json"))["ids"]
                           for m, w in ((d16, "bf16"), (g, "native"))]
                    check(gen[0] == gen[1], "%s: greedy ids folder %s == GGUF %s" % (name, gen[0], gen[1]))
            if name.startswith("A_"):
                # The MLX form of the same weights converts to the same tensors (the loader's
                # storage flags, not the writer, decide about + 1 and the conv layout).
                # f32: to_mlx adds the 1 in the stored dtype, which for bf16 would round 1 + w.
                mlx = os.path.join(tmp, name + "_mlx")
                to_mlx(d32, mlx)
                for fn in ("tokenizer.json", "tokenizer_config.json"):
                    shutil.copyfile(os.path.join(d32, fn), os.path.join(mlx, fn))
                gm = os.path.join(tmp, name + ".mlx.f32.gguf")
                run("convert", "--model", mlx, "--out", gm, "--type", "f32")
                ta = {t.name: gguf_io.tensor_data(gguf_io.parse(gm), t) for t in gguf_io.parse(gm).tensors}
                base = gguf_io.parse(g32)
                tb = {t.name: gguf_io.tensor_data(base, t) for t in base.tensors}
                diff = sorted(n for n in tb if ta.get(n) != tb[n])
                check(set(ta) == set(tb) and not diff, "%s: MLX form converts to the same tensors (differ: %s)"
                      % (name, diff[:4]))
    for f in failures:
        print("FAIL:", f)
    print("%d checks, %d failures" % (checks[0], len(failures)))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
