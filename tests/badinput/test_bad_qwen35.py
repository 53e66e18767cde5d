#!/usr/bin/python3
"""Broken Qwen3.5 hybrid checkpoints must fail cleanly, as test_bad_model_files.py checks for
the dense family: exit code exactly 1, exactly one stderr line `dflash: error: ...` naming the
file and the problem, and no sanitizer report ($DFLASH_ASAN_BIN, the AddressSanitizer build).

  case                     file                       keywords
  missing_linear_tensor    model.safetensors|<dir>    missing ; linear_attn.in_proj_z
  missing_attention_tensor model.safetensors|<dir>    missing ; self_attn.q_proj
  conv_kernel_shape        model.safetensors          shape ; conv1d
  a_log_shape              model.safetensors          shape ; A_log
  nv_not_multiple_of_nk    config.json                multiple ; linear_num_value_heads
  layer_types_length       config.json                layer_types
  layer_types_unknown      config.json                layer_types ; sliding
  missing_linear_key       config.json                missing ; linear_num_key_heads
  rope_type_unsupported    config.json                rope_type ; yarn
The base checkpoint (multimodal form, nk=2 nv=4, layers L,L,L,F, f32) must load first.
Qwen3-Next's dense form (fmt §1.3, make_qwen35 --form qwen3-next, same shape) must load too;
broken copies of it:
  next_qkvz_rows           model.safetensors          shape ; in_proj_qkvz      (2 rows short)
  next_ba_missing          model.safetensors|<dir>    missing ; in_proj_ba
  next_both_forms          model.safetensors          in_proj_qkvz ; in_proj_z  (fused and separate)
  next_moe                 config.json                mixture-of-experts ; num_experts (512)
  next_moe_default         config.json                mixture-of-experts ; num_experts (absent: HF's 512)
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import test_bad_model_files as bm  # noqa: E402  (shared helpers and the run/check rules)

sys.path.insert(0, os.path.join(bm.SRC, "tools"))
from make_qwen35 import make_qwen35  # noqa: E402

ST = bm.ST
P = "model.language_model.layers."
T_Z = P + "0.linear_attn.in_proj_z.weight"
T_Q = P + "3.self_attn.q_proj.weight"
T_CONV = P + "1.linear_attn.conv1d.weight"
T_ALOG = P + "2.linear_attn.A_log"


def text_config(fn):
    def edit(d):
        bm.edit_json(os.path.join(d, "config.json"), lambda j: fn(j["text_config"]))
    return edit


def reshape(name, shape_fn):
    def edit(d):
        def fn(h):
            h[name]["shape"] = shape_fn(h[name]["shape"])
        # Same byte count, other shape: only the shape check can catch it.
        bm.edit_header(os.path.join(d, ST), fn)
    return edit


NP = "model.layers."
T_QKVZ = NP + "1.linear_attn.in_proj_qkvz.weight"
T_BA = NP + "2.linear_attn.in_proj_ba.weight"


def qkvz_short(d):
    """in_proj_qkvz two rows short, its bytes cut to match (a consistent file of the wrong shape)."""
    header, data = bm.load_raw(os.path.join(d, ST))
    rows, cols = header[T_QKVZ]["shape"]
    b, _ = header[T_QKVZ]["data_offsets"]
    bm.replace_tensor(os.path.join(d, ST), T_QKVZ, header[T_QKVZ]["dtype"], [rows - 2, cols],
                      data[b:b + (rows - 2) * cols * 4])


def add_separate_z(d):
    """Layer 1 also gets a separate in_proj_z (zeros of the right shape) beside its fused pair."""
    path = os.path.join(d, ST)
    header, data = bm.load_raw(path)
    cols = header[T_QKVZ]["shape"][1]
    rows = header[NP + "1.linear_attn.out_proj.weight"]["shape"][1]  # nv * dv
    blob = bytes(rows * cols * 4)
    header[NP + "1.linear_attn.in_proj_z.weight"] = {"dtype": "F32", "shape": [rows, cols],
                                                    "data_offsets": [len(data), len(data) + len(blob)]}
    bm.save_raw(path, header, data + blob)


def next_case_list():
    st = lambda d: os.path.join(d, ST)  # noqa: E731
    cfg = lambda fn: lambda d: bm.edit_json(os.path.join(d, "config.json"), fn)  # noqa: E731
    L = bm.LOGITS
    return [
        ("next_qkvz_rows", False, qkvz_short, [ST], ["shape", "in_proj_qkvz"], L),
        ("next_ba_missing", False, lambda d: bm.drop_tensor(st(d), T_BA), [ST, "next_ba_missing"],
         ["missing", "in_proj_ba"], L),
        ("next_both_forms", False, add_separate_z, [ST], ["in_proj_qkvz", "in_proj_z."], L),
        ("next_moe", False, cfg(lambda j: j.update(num_experts=512)), ["config.json"],
         ["mixture-of-experts", "num_experts"], L),
        ("next_moe_default", False, cfg(lambda j: j.pop("num_experts")), ["config.json"],
         ["mixture-of-experts", "num_experts"], L),
    ]


def case_list():
    st = lambda d: os.path.join(d, ST)  # noqa: E731
    L = bm.LOGITS
    return [
        ("missing_linear_tensor", False, lambda d: bm.drop_tensor(st(d), T_Z), [ST, "missing_linear_tensor"],
         ["missing", "linear_attn.in_proj_z"], L),
        ("missing_attention_tensor", False, lambda d: bm.drop_tensor(st(d), T_Q), [ST, "missing_attention_tensor"],
         ["missing", "self_attn.q_proj"], L),
        # [C, 1, 4] stored as [C, 2, 2]: the kernel size disagrees with linear_conv_kernel_dim.
        ("conv_kernel_shape", False, reshape(T_CONV, lambda s: [s[0], 2, 2]), [ST], ["shape", "conv1d"], L),
        ("a_log_shape", False, reshape(T_ALOG, lambda s: [s[0] // 2, 2]), [ST], ["shape", "A_log"], L),
        ("nv_not_multiple_of_nk", False, text_config(lambda j: j.update(linear_num_value_heads=5)), ["config.json"],
         ["multiple", "linear_num_value_heads"], L),
        ("layer_types_length", False, text_config(lambda j: j["layer_types"].pop()), ["config.json"],
         ["layer_types"], L),
        ("layer_types_unknown", False, text_config(lambda j: j["layer_types"].__setitem__(0, "sliding_attention")),
         ["config.json"], ["layer_types", "sliding"], L),
        ("missing_linear_key", False, text_config(lambda j: j.pop("linear_num_key_heads")), ["config.json"],
         ["missing", "linear_num_key_heads"], L),
        ("rope_type_unsupported", False, text_config(lambda j: j["rope_parameters"].update(rope_type="yarn")),
         ["config.json"], ["rope_type", "yarn"], L),
    ]


def main():
    binary = os.environ.get("DFLASH_ASAN_BIN")
    if not binary:
        binary = os.environ.get("DFLASH_BIN") or os.path.join(bm.SRC, "build", "dflash")
        print(f"WARNING: DFLASH_ASAN_BIN not set; using {binary} (memory errors may go unseen)")
    if not os.access(binary, os.X_OK):
        print(f"FAIL binary not found: {binary}\n0 passed, 1 failed")
        return 1
    n_pass = n_fail = 0
    with tempfile.TemporaryDirectory(prefix="dflash_bad_q35_") as tmp:
        base = os.path.join(tmp, "base")
        make_qwen35(base, form="multimodal", hidden=64, layers=4, layer_types="L,L,L,F", linear_key_heads=2,
                    linear_value_heads=4, vocab=300, dtype="f32", seed=3)
        nxt = os.path.join(tmp, "base_next")
        make_qwen35(nxt, form="qwen3-next", hidden=64, layers=4, layer_types="L,L,L,F", linear_key_heads=2,
                    linear_value_heads=4, vocab=300, dtype="f32", seed=3)
        for label, d, cases in (("hybrid", base, case_list()), ("qwen3-next", nxt, next_case_list())):
            p = subprocess.run([binary, bm.LOGITS[0], "--model", d] + bm.LOGITS[1:], capture_output=True, text=True,
                               timeout=120, env=bm.asan_env())
            ok = p.returncode == 0 and not p.stderr.strip()
            n_pass, n_fail = n_pass + ok, n_fail + (not ok)
            print(f"{'PASS' if ok else 'FAIL'} valid {label} model loads: exit {p.returncode} {p.stderr.strip()[:300]}",
                  flush=True)
            for case in cases:
                ok, detail = bm.run_case(binary, {False: d}, tmp, case)
                n_pass, n_fail = n_pass + ok, n_fail + (not ok)
                print(f"{'PASS' if ok else 'FAIL'} {case[0]}: {detail}", flush=True)
    print(f"{n_pass} passed, {n_fail} failed")
    return 1 if n_fail else 0


if __name__ == "__main__":
    sys.exit(main())
