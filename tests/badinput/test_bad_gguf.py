#!/usr/bin/python3
"""Corrupt GGUF files must fail cleanly: exit code exactly 1, exactly one stderr line
`dflash: error: ...` naming the file and the problem, and no sanitizer report.

A valid GGUF is written by `dflash convert` (q8_0, a small random qwen3 model with its
tokenizer); each case corrupts one field, then runs $DFLASH_ASAN_BIN (AddressSanitizer build;
falls back to $DFLASH_BIN with a warning):
  logits --model F.gguf --prompt-ids 1,2,3 --weights native --out /dev/null
  (tokenizer cases: generate --model F.gguf --prompt hi --max-tokens 1 --weights native)
The error line must contain the file's basename and every keyword group of the case
("a|b" means either), listed in CASES below.
"""
import os
import struct
import subprocess
import sys
import tempfile

SRC = os.environ.get("DFLASH_SOURCE_DIR") or os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(SRC, "tools"))
from make_model import make_model  # noqa: E402
import gguf_io as G  # noqa: E402

LOGITS = ["logits", "--prompt-ids", "1,2,3", "--weights", "native", "--out", "/dev/null"]
GENERATE = ["generate", "--prompt", "hi", "--max-tokens", "1", "--weights", "native"]
LOGITS_Q4K = ["logits", "--prompt-ids", "1,2,3", "--weights", "q4_k", "--out", "/dev/null"]
T_Q = "blk.0.attn_q.weight"
T_DOWN = "blk.1.ffn_down.weight"


def patch(path, at, fmt, value):
    b = bytearray(open(path, "rb").read())
    struct.pack_into(fmt, b, at, value)
    open(path, "wb").write(bytes(b))


def truncate(path, n):
    b = open(path, "rb").read()
    open(path, "wb").write(b[:n] if n >= 0 else b[:len(b) + n])


def tensor(path, name):
    return next(t for t in G.parse(path).tensors if t.name == name)


def kvpos(path, key):
    return G.parse(path).kv_pos[key]


def set_kv(key, t, v):
    def f(kv):
        out = [(k, tt, vv) for k, tt, vv in kv if k != key]
        return out + [(key, t, v)] if v is not None else out
    return f


def edit_kv(fn):
    return lambda p: G.rewrite(p, p, edit_kv=fn)


def edit_tensors(fn):
    return lambda p: G.rewrite(p, p, edit_tensors=fn)


def drop_tensor(name):
    return edit_tensors(lambda ts: [t for t in ts if t[0] != name])


def halve_rows(name):
    def f(ts):
        out = []
        for n, ne, tt, raw in ts:
            if n == name:
                ne = [ne[0], ne[1] // 2]
                raw = raw[:len(raw) // 2]
            out.append((n, ne, tt, raw))
        return out
    return edit_tensors(f)


def retype(name, new_type):
    def f(ts):
        out = []
        for n, ne, tt, raw in ts:
            if n == name:
                blk, bb = {6: (32, 22), 12: (256, 144), 14: (256, 210)}[new_type]
                raw = raw[:ne[0] * ne[1] // blk * bb]
                tt = new_type
            out.append((n, ne, tt, raw))
        return out
    return edit_tensors(f)


def nested(depth):
    v = (G.I32, [1])
    for _ in range(depth):
        v = (G.ARRAY, [v])
    return edit_kv(lambda kv: kv + [("x.deep", G.ARRAY, v)])


def tokens_count(path):
    # tokenizer.ggml.tokens value: u32 elem type, then its u64 count
    return kvpos(path, "tokenizer.ggml.tokens")["value"] + 4



CASES = [
    # name, mutate(path), keyword groups, command
    ("bad_magic", lambda p: patch(p, 0, "4s", b"GGUX"), ["magic"], LOGITS),
    ("bad_version", lambda p: patch(p, 4, "<I", 7), ["version"], LOGITS),
    ("empty_file", lambda p: truncate(p, 0), ["truncated"], LOGITS),
    ("truncated_header", lambda p: truncate(p, 20), ["truncated"], LOGITS),
    ("truncated_metadata", lambda p: truncate(p, kvpos(p, "tokenizer.ggml.merges")["value"] + 40),
     ["truncated|absurd"], LOGITS),
    ("truncated_tensor_infos", lambda p: truncate(p, tensor(p, T_DOWN).pos["type"] + 2), ["truncated"], LOGITS),
    ("truncated_data", lambda p: truncate(p, -300), ["truncated"], LOGITS),
    ("offset_past_end", lambda p: patch(p, tensor(p, T_Q).pos["offset"], "<Q", 1 << 40),
     ["past the end|truncated", T_Q], LOGITS),
    ("offset_misaligned", lambda p: patch(p, tensor(p, T_Q).pos["offset"], "<Q", tensor(p, T_Q).offset + 4),
     ["alignment", T_Q], LOGITS),
    ("unknown_tensor_type", lambda p: patch(p, tensor(p, T_Q).pos["type"], "<I", 99),
     ["unknown tensor type", T_Q], LOGITS),
    ("unsupported_tensor_type", retype(T_DOWN, 6), ["unsupported", "Q5_0", T_DOWN], LOGITS),
    # K-quant rows are whole super-blocks of 256: a Q4_K/Q6_K tensor with 128-value rows
    # (ffn_down here) is refused by the reader, and so is converting 64-column matrices to q4_k.
    ("kquant_row_not_256", retype(T_DOWN, 12), ["multiple", "Q4_K", "256", T_DOWN], LOGITS),
    ("q6k_row_not_256", retype(T_DOWN, 14), ["multiple", "Q6_K", "256", T_DOWN], LOGITS),
    ("weights_q4k_cols_not_256", lambda p: None, ["multiple of 256", "q4_k"], LOGITS_Q4K),
    ("absurd_n_dims", lambda p: patch(p, tensor(p, T_Q).pos["n_dims"], "<I", 9), ["dimensions", T_Q], LOGITS),
    ("absurd_dim", lambda p: patch(p, tensor(p, T_Q).pos["dims"], "<Q", 1 << 50), ["absurd dimension", T_Q], LOGITS),
    ("dims_overflow", lambda p: (patch(p, tensor(p, T_Q).pos["dims"], "<Q", 1 << 39),
                                 patch(p, tensor(p, T_Q).pos["dims"] + 8, "<Q", 1 << 39)),
     ["overflow", T_Q], LOGITS),
    ("absurd_kv_count", lambda p: patch(p, 16, "<Q", 1 << 60), ["metadata count"], LOGITS),
    ("absurd_tensor_count", lambda p: patch(p, 8, "<Q", 1 << 60), ["tensor count"], LOGITS),
    ("absurd_string_length", lambda p: patch(p, 24, "<Q", 1 << 62), ["string length"], LOGITS),
    ("absurd_array_length", lambda p: patch(p, tokens_count(p), "<Q", 1 << 61), ["array length"], LOGITS),
    ("unknown_value_type", lambda p: patch(p, kvpos(p, "general.name")["type"], "<I", 13),
     ["unknown value type", "general.name"], LOGITS),
    ("arrays_nested_too_deep", nested(6), ["nested"], LOGITS),
    ("bad_alignment", edit_kv(set_kv("general.alignment", G.U32, 3)), ["alignment"], LOGITS),
    ("duplicate_key", edit_kv(lambda kv: kv + [kv[0]]), ["twice", "general.architecture"], LOGITS),
    ("missing_tensor", drop_tensor(T_DOWN), ["missing", T_DOWN], LOGITS),
    ("wrong_shape", halve_rows(T_Q), ["shape", T_Q], LOGITS),
    ("missing_hparam", edit_kv(set_kv("qwen3.embedding_length", 0, None)), ["missing", "embedding_length"], LOGITS),
    ("hparam_wrong_type", edit_kv(set_kv("qwen3.block_count", G.STRING, "two")), ["integer", "block_count"], LOGITS),
    ("unknown_architecture", edit_kv(set_kv("general.architecture", G.STRING, "mamba")),
     ["architecture", "mamba"], LOGITS),
    ("tokenizer_unknown_pre", edit_kv(set_kv("tokenizer.ggml.pre", G.STRING, "falcon")),
     ["tokenizer.ggml.pre", "falcon"], GENERATE),
    ("tokenizer_unknown_model", edit_kv(set_kv("tokenizer.ggml.model", G.STRING, "llama")),
     ["tokenizer.ggml.model", "llama"], GENERATE),
    ("tokenizer_token_type_count", edit_kv(set_kv("tokenizer.ggml.token_type", G.ARRAY, (G.I32, [1, 1, 1]))),
     ["token_type"], GENERATE),
    ("tokenizer_bad_merge", edit_kv(set_kv("tokenizer.ggml.merges", G.ARRAY, (G.STRING, ["abc"]))),
     ["merges", "abc"], GENERATE),
    ("tokenizer_bos_out_of_range", edit_kv(set_kv("tokenizer.ggml.bos_token_id", G.U32, 10 ** 7)),
     ["bos_token_id"], GENERATE),
    ("tokenizer_tokens_not_strings", edit_kv(set_kv("tokenizer.ggml.tokens", G.ARRAY, (G.I32, [1, 2]))),
     ["tokenizer.ggml.tokens", "strings"], GENERATE),
]


def asan_env():
    env = dict(os.environ)
    opts = env.get("ASAN_OPTIONS", "")
    if "exitcode=" not in opts:  # ASan's default exit code 1 would look like a clean error
        env["ASAN_OPTIONS"] = (opts + ":" if opts else "") + "exitcode=86"
    return env


def run_case(binary, good, tmp, case):
    name, mutate, keywords, cmd = case
    path = os.path.join(tmp, name + ".gguf")
    open(path, "wb").write(open(good, "rb").read())
    mutate(path)
    argv = [binary, cmd[0], "--model", path] + cmd[1:]
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=asan_env())
    except subprocess.TimeoutExpired:
        return False, "timed out after 120 s"
    lines = [l for l in p.stderr.splitlines() if l.strip()]
    problems = []
    if p.returncode != 1:
        problems.append(f"exit code {p.returncode} (want 1)")
    if "Sanitizer" in p.stdout + p.stderr or "runtime error:" in p.stderr:
        problems.append("sanitizer report")
    if len(lines) != 1:
        problems.append(f"{len(lines)} stderr lines (want 1)")
    line = lines[0] if lines else ""
    if not line.startswith("dflash: error: "):
        problems.append("line does not start with 'dflash: error: '")
    low = line.lower()
    if os.path.basename(path).lower() not in low:
        problems.append("does not name the file")
    for group in keywords:
        if not any(k.lower() in low for k in group.split("|")):
            problems.append(f"no keyword {group!r}")
    shown = line if len(lines) <= 1 else " | ".join(lines[:3])[:600]
    return not problems, ("; ".join(problems) + " -- " if problems else "") + shown


def main():
    plain = os.environ.get("DFLASH_BIN") or os.path.join(SRC, "build", "dflash")
    binary = os.environ.get("DFLASH_ASAN_BIN")
    if not binary:
        binary = plain
        print(f"WARNING: DFLASH_ASAN_BIN not set; using {binary} (memory errors may go unseen)")
    n_pass = n_fail = 0
    with tempfile.TemporaryDirectory() as tmp:
        d = os.path.join(tmp, "model")
        make_model(d, arch="qwen3", hidden=64, layers=2, heads=2, kv_heads=1, head_dim=32, ffn=128,
                   vocab=512, tie=False, dtype="bf16", seed=1)
        good = os.path.join(tmp, "good.gguf")
        subprocess.run([plain, "convert", "--model", d, "--out", good, "--type", "q8_0"], check=True,
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
            print(("PASS " if ok else "FAIL ") + f"{case[0]:28s} {msg}")
            n_pass += ok
            n_fail += not ok
    print(f"{n_pass} passed, {n_fail} failed")
    return 1 if n_fail else 0


if __name__ == "__main__":
    sys.exit(main())
