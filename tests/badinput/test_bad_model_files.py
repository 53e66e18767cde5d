#!/usr/bin/python3
"""Corrupted model folders must fail cleanly: exit code exactly 1, exactly one stderr line
`dflash: error: ...` naming the offending file and the problem, and no sanitizer report.

Runs $DFLASH_ASAN_BIN (AddressSanitizer build; falls back to $DFLASH_BIN with a warning):
  logits --model DIR --prompt-ids 1,2,3 --weights f32 --out /dev/null
  (tokenizer case: generate --model DIR --prompt hi --max-tokens 1 --weights f32)

Expected per case: the error line must contain the FILE (basename) and every KEYWORD group
(case-insensitive; "a|b" means either):
  case                        file                               keywords
  truncated_data              model.safetensors                  truncated
  truncated_in_length         model.safetensors                  truncated
  empty_file                  model.safetensors                  truncated|empty
  header_len_past_eof         model.safetensors                  header
  header_json_invalid         model.safetensors                  json
  offsets_past_end            model.safetensors                  offset
  offsets_size_mismatch       model.safetensors                  match|size ; <tensor name>
  offsets_overlap             model.safetensors                  overlap
  missing_tensor              model.safetensors|<model dir>      missing ; <tensor name>
  wrong_shape                 model.safetensors                  shape ; <tensor name>
  unknown_architecture        config.json                        architecture ; FooForCausalLM
  dtype_f8                    model.safetensors                  dtype ; F8_E4M3
  dtype_i64                   model.safetensors                  dtype ; I64
  config_malformed_json       config.json                        json
  config_missing_hidden_size  config.json                        missing ; hidden_size
  config_missing_vocab_size   config.json                        missing ; vocab_size
  tokenizer_unknown_model     tokenizer.json                     type ; FooModel
  index_missing_shard         model-00002-of-00002.safetensors   missing
  index_names_absent_tensor   model-00001-of-00002.safetensors   missing ; <tensor name>
Tensor names are matched without the "model." prefix (layers.1.mlp.down_proj.weight), so a
message may use either spelling.
"""
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

SRC = os.environ.get("DFLASH_SOURCE_DIR") or os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(SRC, "tools"))
from make_model import make_model  # noqa: E402
from reference.safetensors_io import encode_header, read_header  # noqa: E402

ST = "model.safetensors"
LOGITS = ["logits", "--prompt-ids", "1,2,3", "--weights", "f32", "--out", "/dev/null"]
GENERATE = ["generate", "--prompt", "hi", "--max-tokens", "1", "--weights", "f32"]
# Tensors the cases break (HF names of the small qwen3 model below) and the unprefixed tails
# that the error line must contain.
T_DOWN = "model.layers.1.mlp.down_proj.weight"
T_Q = "model.layers.0.self_attn.q_proj.weight"
T_NORM = "model.layers.0.input_layernorm.weight"
T_ABSENT = "model.layers.7.mlp.up_proj.weight"


def tail(name):
    return name[len("model."):]


# --- helpers that rewrite a safetensors file ----------------------------------------------
def load_raw(path):
    header, start = read_header(path)
    with open(path, "rb") as f:
        data = f.read()[start:]
    return header, data


def save_raw(path, header, data, header_bytes=None):
    hdr = encode_header(header) if header_bytes is None else header_bytes
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hdr)))
        f.write(hdr)
        f.write(data)


def edit_header(path, fn):
    header, data = load_raw(path)
    fn(header)
    save_raw(path, header, data)


def drop_tensor(path, name):
    """Remove a tensor and its bytes, keeping the other offsets consistent."""
    header, data = load_raw(path)
    b, e = header.pop(name)["data_offsets"]
    for k, v in header.items():
        if k != "__metadata__" and v["data_offsets"][0] >= e:
            v["data_offsets"] = [v["data_offsets"][0] - (e - b), v["data_offsets"][1] - (e - b)]
    save_raw(path, header, data[:b] + data[e:])


def replace_tensor(path, name, dtype, shape, raw):
    """Give one tensor new dtype/shape/bytes and re-lay the data section contiguously, so the
    file is valid except for what the case means to break."""
    header, data = load_raw(path)
    names = sorted((k for k in header if k != "__metadata__"),
                   key=lambda k: header[k]["data_offsets"][0])
    out, blobs = {}, []
    for k in names:
        b, e = header[k]["data_offsets"]
        blob = raw if k == name else data[b:e]
        info = dict(header[k], data_offsets=[sum(map(len, blobs)), sum(map(len, blobs)) + len(blob)])
        if k == name:
            info.update(dtype=dtype, shape=shape)
        out[k] = info
        blobs.append(blob)
    out["__metadata__"] = header.get("__metadata__", {"format": "pt"})
    save_raw(path, out, b"".join(blobs))


def edit_json(path, fn):
    with open(path) as f:
        j = json.load(f)
    fn(j)
    with open(path, "w") as f:
        json.dump(j, f)


def truncate(path, keep):
    with open(path, "rb") as f:
        raw = f.read()
    with open(path, "wb") as f:
        f.write(raw[:keep(len(raw))])


# --- cases: (name, sharded?, mutate(dir), file alternatives, keyword groups, command) ---
def case_list():
    def st(d):
        return os.path.join(d, ST)

    def set_dtype(name, dtype, per_elem):
        # A well-formed tensor of the right shape, stored in a dtype the engine does not take.
        def fn(d):
            shape = read_header(st(d))[0][name]["shape"]
            n = 1
            for x in shape:
                n *= x
            replace_tensor(st(d), name, dtype, shape, bytes(range(7, 7 + per_elem)) * n)
        return fn

    def overlap(h):
        # two equal-sized norm weights pointing at the same bytes
        h["model.layers.1.input_layernorm.weight"]["data_offsets"] = list(h[T_NORM]["data_offsets"])

    def wrong_shape(d):
        # Same byte count, different shape: passes the file checks, fails against config.json.
        def fn(h):
            rows, cols = h[T_Q]["shape"]
            h[T_Q]["shape"] = [rows * 2, cols // 2]
        edit_header(st(d), fn)

    def past_end(h):
        # right size, but the range starts past the end of the data
        h[T_DOWN]["data_offsets"] = [x + (1 << 20) for x in h[T_DOWN]["data_offsets"]]

    def size_mismatch(h):
        h[T_DOWN]["data_offsets"][1] -= 4  # one float short: no longer shape x dtype bytes

    def header_len(d):
        size = os.path.getsize(st(d))
        with open(st(d), "r+b") as f:
            f.write(struct.pack("<Q", size + 1000))

    def header_garbage(d):
        header, data = load_raw(st(d))
        n = len(encode_header(header))
        save_raw(st(d), header, data, (b'{"' + T_Q.encode() + b'": {"dtype": [,,').ljust(n, b" "))

    def absent_in_index(j):
        # the index lists a tensor that no shard holds
        j["weight_map"][T_ABSENT] = "model-00001-of-00002.safetensors"

    return [
        ("truncated_data", False, lambda d: truncate(st(d), lambda n: n // 2), [ST], ["truncated"], LOGITS),
        ("truncated_in_length", False, lambda d: truncate(st(d), lambda n: 5), [ST], ["truncated"], LOGITS),
        ("empty_file", False, lambda d: truncate(st(d), lambda n: 0), [ST], ["truncated|empty"], LOGITS),
        ("header_len_past_eof", False, header_len, [ST], ["header"], LOGITS),
        ("header_json_invalid", False, header_garbage, [ST], ["json"], LOGITS),
        ("offsets_past_end", False, lambda d: edit_header(st(d), past_end), [ST], ["offset"], LOGITS),
        ("offsets_size_mismatch", False, lambda d: edit_header(st(d), size_mismatch), [ST],
         ["match|size", tail(T_DOWN)], LOGITS),
        ("offsets_overlap", False, lambda d: edit_header(st(d), overlap), [ST], ["overlap"], LOGITS),
        ("missing_tensor", False, lambda d: drop_tensor(st(d), T_DOWN), [ST, "missing_tensor"],
         ["missing", tail(T_DOWN)], LOGITS),
        ("wrong_shape", False, wrong_shape, [ST], ["shape", tail(T_Q)], LOGITS),
        ("unknown_architecture", False, lambda d: edit_json(
            os.path.join(d, "config.json"),
            lambda j: j.update(architectures=["FooForCausalLM"], model_type="foo")),
         ["config.json"], ["architecture", "FooForCausalLM"], LOGITS),
        ("dtype_f8", False, set_dtype(T_Q, "F8_E4M3", 1), [ST],
         ["dtype", "F8_E4M3"], LOGITS),
        ("dtype_i64", False, set_dtype(T_NORM, "I64", 8), [ST],
         ["dtype", "I64"], LOGITS),
        ("config_malformed_json", False, lambda d: open(os.path.join(d, "config.json"), "w").write(
            '{"architectures": ["Qwen3ForCausalLM"], "hidden_size": 64,'),
         ["config.json"], ["json"], LOGITS),
        ("config_missing_hidden_size", False, lambda d: edit_json(
            os.path.join(d, "config.json"), lambda j: j.pop("hidden_size")),
         ["config.json"], ["missing", "hidden_size"], LOGITS),
        ("config_missing_vocab_size", False, lambda d: edit_json(
            os.path.join(d, "config.json"), lambda j: j.pop("vocab_size")),
         ["config.json"], ["missing", "vocab_size"], LOGITS),
        ("tokenizer_unknown_model", False, lambda d: edit_json(
            os.path.join(d, "tokenizer.json"), lambda j: j["model"].update(type="FooModel")),
         ["tokenizer.json"], ["type", "FooModel"], GENERATE),
        ("index_missing_shard", True, lambda d: os.remove(
            os.path.join(d, "model-00002-of-00002.safetensors")),
         ["model-00002-of-00002.safetensors"], ["missing"], LOGITS),
        ("index_names_absent_tensor", True, lambda d: edit_json(
            os.path.join(d, "model.safetensors.index.json"), absent_in_index),
         ["model-00001-of-00002.safetensors"], ["missing", tail(T_ABSENT)], LOGITS),
    ]


def asan_env():
    env = dict(os.environ)
    # ASan's default exit code is 1, the same as a clean error: make sanitizer exits distinct.
    opts = env.get("ASAN_OPTIONS", "")
    if "exitcode=" not in opts:
        env["ASAN_OPTIONS"] = (opts + ":" if opts else "") + "exitcode=86"
    return env


def run_case(binary, base_dirs, tmp, case):
    name, sharded, mutate, files, keywords, cmd = case
    d = os.path.join(tmp, name)
    shutil.copytree(base_dirs[sharded], d)
    mutate(d)
    argv = [binary, cmd[0], "--model", d] + cmd[1:]
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
    if not any(f.lower() in low for f in files):
        problems.append(f"does not name {' or '.join(files)}")
    for group in keywords:
        if not any(k.lower() in low for k in group.split("|")):
            problems.append(f"no keyword {group!r}")
    shown = line if len(lines) <= 1 else " | ".join(lines[:3])[:600]
    return not problems, ("; ".join(problems) + " -- " if problems else "") + shown


def main():
    binary = os.environ.get("DFLASH_ASAN_BIN")
    if not binary:
        binary = os.environ.get("DFLASH_BIN") or os.path.join(SRC, "build", "dflash")
        print(f"WARNING: DFLASH_ASAN_BIN not set; using {binary} (memory errors may go unseen)")
    if not os.access(binary, os.X_OK):
        print(f"FAIL binary not found: {binary}")
        print("0 passed, 1 failed")
        return 1
    n_pass = n_fail = 0
    with tempfile.TemporaryDirectory(prefix="dflash_badinput_") as tmp:
        shape = dict(arch="qwen3", hidden=64, layers=2, heads=4, kv_heads=2, head_dim=16, ffn=96,
                     vocab=300, tie=False, seed=3)
        base = {False: os.path.join(tmp, "base"), True: os.path.join(tmp, "base_sharded")}
        make_model(base[False], **shape)
        make_model(base[True], shards=2, **shape)
        # The untouched models must load, or every case below would pass for the wrong reason.
        for sharded, d in base.items():
            p = subprocess.run([binary, LOGITS[0], "--model", d] + LOGITS[1:], capture_output=True,
                               text=True, timeout=120, env=asan_env())
            ok = p.returncode == 0 and not p.stderr.strip()
            n_pass, n_fail = n_pass + ok, n_fail + (not ok)
            print(f"{'PASS' if ok else 'FAIL'} valid{'_sharded' if sharded else ''} model loads: "
                  f"exit {p.returncode} {p.stderr.strip()[:300]}", flush=True)
        for case in case_list():
            ok, detail = run_case(binary, base, tmp, case)
            n_pass, n_fail = n_pass + ok, n_fail + (not ok)
            print(f"{'PASS' if ok else 'FAIL'} {case[0]}: {detail}", flush=True)
    print(f"{n_pass} passed, {n_fail} failed")
    return 1 if n_fail else 0


if __name__ == "__main__":
    sys.exit(main())
