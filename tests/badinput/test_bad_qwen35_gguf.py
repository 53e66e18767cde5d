#!/usr/bin/python3
"""Corrupt Qwen3.5 (qwen35) GGUF files must fail cleanly, as test_bad_gguf.py asks of dense ones:
exit code exactly 1, exactly one stderr line `dflash: error: ...` naming the file and the
problem (every keyword group of the case), and no sanitizer report, under $DFLASH_ASAN_BIN
(AddressSanitizer build; falls back to $DFLASH_BIN with a warning).

A valid file is written by `dflash convert` (bf16) from a random Qwen3.5 folder
(tools/make_qwen35.py: nk=2, nv=4, dk=dv=32, layers L,F,L,L, with its tokenizer); each case
corrupts one thing: a linear-attention tensor missing, the conv with the wrong shape, ssm_a in
a type vectors may not have, the ssm.* metadata missing or inconsistent, the layer flags short.
"""
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_bad_gguf import (GENERATE, LOGITS, SRC, asan_env, drop_tensor, edit_kv, edit_tensors,  # noqa: E402
                           run_case, set_kv)
from make_qwen35 import make_qwen35  # noqa: E402  (tools/ is on the path through test_bad_gguf)
import gguf_io as G  # noqa: E402

CONV = "blk.0.ssm_conv1d.weight"
BETA = "blk.2.ssm_beta.weight"
SSM_A = "blk.0.ssm_a"


def conv_kernel_short(ts):
    """ssm_conv1d with 3 taps per channel instead of the metadata's 4 (ne [3, C])."""
    out = []
    for n, ne, tt, raw in ts:
        if n == CONV:
            ne = [ne[0] - 1, ne[1]]
            raw = raw[:ne[0] * ne[1] * 4]
        out.append((n, ne, tt, raw))
    return out


def conv_unsqueezed(ts):
    """ssm_conv1d as Hugging Face stores it, [C, 1, K] (ne [K, 1, C]): not llama.cpp's [K, C]."""
    return [(n, [ne[0], 1, ne[1]] if n == CONV else ne, tt, raw) for n, ne, tt, raw in ts]


def ssm_a_as_q8(ts):
    """ssm_a retyped to Q8_0 (one 34-byte block would need 32 values; the vector has 4)."""
    return [(n, ne, 8 if n == SSM_A else tt, raw) for n, ne, tt, raw in ts]


CASES = [
    # name, mutate(path), keyword groups, command
    ("qwen35_missing_ssm_beta", drop_tensor(BETA), ["missing", BETA], LOGITS),
    ("qwen35_missing_conv", drop_tensor(CONV), ["missing", CONV], LOGITS),
    ("qwen35_conv_wrong_kernel", edit_tensors(conv_kernel_short), ["shape", CONV], LOGITS),
    ("qwen35_conv_unsqueezed", edit_tensors(conv_unsqueezed), ["shape", CONV], LOGITS),
    ("qwen35_ssm_a_quantized", edit_tensors(ssm_a_as_q8), [SSM_A], LOGITS),
    ("qwen35_missing_state_size", edit_kv(set_kv("qwen35.ssm.state_size", 0, None)),
     ["missing", "ssm.state_size"], LOGITS),
    ("qwen35_inner_size_not_multiple", edit_kv(set_kv("qwen35.ssm.inner_size", G.U32, 129)),
     ["inner_size"], LOGITS),
    ("qwen35_value_heads_not_multiple", edit_kv(set_kv("qwen35.ssm.time_step_rank", G.U32, 1)),
     ["time_step_rank", "group_count"], LOGITS),
    ("qwen35_recurrent_layers_short", edit_kv(set_kv("qwen35.attention.recurrent_layers", G.ARRAY, (G.BOOL, [1, 0]))),
     ["recurrent_layers"], LOGITS),
    ("qwen35_recurrent_layers_strings", edit_kv(set_kv("qwen35.attention.recurrent_layers", G.ARRAY,
                                                       (G.STRING, ["a", "b", "c", "d"]))),
     ["recurrent_layers"], LOGITS),
    # A full-attention layer flagged linear: its linear tensors are not in the file.
    ("qwen35_layer_flag_flipped", edit_kv(set_kv("qwen35.attention.recurrent_layers", G.ARRAY,
                                                 (G.BOOL, [1, 1, 1, 1]))),
     ["missing", "blk.1."], LOGITS),
]


def main():
    plain = os.environ.get("DFLASH_BIN") or os.path.join(SRC, "build", "dflash")
    binary = os.environ.get("DFLASH_ASAN_BIN")
    if not binary:
        binary = plain
        print(f"WARNING: DFLASH_ASAN_BIN not set; using {binary} (memory errors may go unseen)")
    n_pass = n_fail = 0
    with tempfile.TemporaryDirectory() as tmp:
        d = os.path.join(tmp, "model")
        make_qwen35(d, hidden=64, layers=4, layer_types="L,F,L,L", linear_key_heads=2, linear_value_heads=4,
                    linear_key_dim=32, linear_value_dim=32, heads=2, kv_heads=1, head_dim=32, vocab=384,
                    dtype="bf16", seed=1)
        good = os.path.join(tmp, "good.gguf")
        subprocess.run([plain, "convert", "--model", d, "--out", good, "--type", "bf16"], check=True,
                       capture_output=True)
        # The untouched file must work, or every case below would pass for the wrong reason.
        for cmd in (LOGITS, GENERATE):
            r = subprocess.run([binary, cmd[0], "--model", good] + cmd[1:], capture_output=True, text=True,
                               env=asan_env())
            if r.returncode != 0:
                print(f"FAIL valid file refused by {cmd[0]}: {r.stderr.strip()}")
                return 1
        for case in CASES:
            ok, msg = run_case(binary, good, tmp, case)
            print(("PASS " if ok else "FAIL ") + f"{case[0]:34s} {msg}")
            n_pass += ok
            n_fail += not ok
    print(f"{n_pass} passed, {n_fail} failed")
    return 1 if n_fail else 0


if __name__ == "__main__":
    sys.exit(main())
