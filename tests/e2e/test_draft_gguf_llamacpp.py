#!/usr/bin/python3
"""Draft GGUF files written by tools/draft_gguf.py load in llama.cpp's own loader.

llama-server runs DFlash drafts as `-md DRAFT.gguf --spec-type draft-dflash`; its loader needs
more than dflash's (dflash.context_length, the target's tokenizer.* keys, and for DFlash2 the
conv/selector keys and tensors under llama.cpp's names and shapes). This test needs no
llama-server binary: it loads each file with llama.cpp's loader through node-llama-cpp's
prebuilt CPU library (`node tools/bench/llamacpp_peer.mjs load`), which reads every
hyperparameter and checks every tensor's name, shape and count as llama-server does.

For a small random Qwen3 target (converted with `dflash convert`) and a DFlash and a DFlash2
draft of it, each written with --target (tokenizer copied) and matrices as stored and as Q4_0:
  - llama.cpp loads the file (DFlash2: its log names the conv kernel and selector);
  - the file's tokenizer.* keys equal the target GGUF's, its mask token is the draft's;
  - the same file without dflash.context_length is refused, naming the key (so the load check
    does discriminate);
  - Q4_0 / Q8_0 matrices are byte for byte what `dflash convert` writes for the same values;
  - dflash still reads the v1 file (extra tokenizer keys ignored): its draft logits equal the
    folder draft's bit for bit.
Running the pair in llama-server is opt-in and outside this test (the binary is not in CI).
node-llama-cpp missing is a failure, not a skip (scripts/install-deps.sh installs it).
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

from harness import BIN, SRC, check, finish  # noqa: E402
sys.path.insert(0, os.path.join(SRC, "tools"))
from make_model import make_model  # noqa: E402
from make_draft import make_draft  # noqa: E402
from make_draft2 import make_draft2  # noqa: E402
from draft_gguf import write_draft_gguf, quantize_q4_0, quantize_q8_0  # noqa: E402
import gguf_io as G  # noqa: E402
from reference.safetensors_io import read_model_tensors  # noqa: E402

PEER = os.path.join(SRC, "tools", "bench", "llamacpp_peer.mjs")
PROMPT = ",".join(str((i * 29 + 5) % 400) for i in range(20))


def run(cmd, timeout=300):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        raise SystemExit("FAIL: %s\n%s%s" % (" ".join(cmd), r.stdout, r.stderr))
    return r.stdout


def llama_load(path):
    if not os.path.isfile(os.path.join(SRC, "node_modules", "node-llama-cpp", "package.json")):
        raise SystemExit("FAIL: node-llama-cpp not installed in %s/node_modules (scripts/install-deps.sh)" % SRC)
    return json.loads(run(["node", PEER, "load", "--model", path]).strip().splitlines()[-1])


def kv_dict(path):
    return {k: v for k, _, v in G.read_kv(path)}


def check_quant_bytes(tdir, tmp):
    """draft_gguf's Q4_0/Q8_0 against dflash convert's bytes for the same bf16 matrix."""
    src = read_model_tensors(tdir)["model.layers.0.mlp.up_proj.weight"].float().numpy()
    for kind, fn in (("q4_0", quantize_q4_0), ("q8_0", quantize_q8_0)):
        out = os.path.join(tmp, f"target_{kind}.gguf")
        run([BIN, "convert", "--model", tdir, "--out", out, "--type", kind])
        g = G.parse(out)
        t = next(t for t in g.tensors if t.name == "blk.0.ffn_up.weight")
        ours = fn(src)
        check(f"{kind} bytes == dflash convert's", G.tensor_data(g, t) == ours and t.type == {"q4_0": 2, "q8_0": 8}[kind],
              f"type {t.type}, {len(ours)} bytes")


def main():
    with tempfile.TemporaryDirectory(prefix="dflash_draft_gguf_llama_") as tmp:
        tdir = os.path.join(tmp, "target")
        make_model(tdir, dtype="bf16", seed=5, arch="qwen3", hidden=512, layers=4, heads=4, kv_heads=2,
                   head_dim=64, ffn=512, vocab=512, tie=True)
        tgguf = os.path.join(tmp, "target.gguf")
        run([BIN, "convert", "--model", tdir, "--out", tgguf, "--type", "q8_0"])
        tkv = kv_dict(tgguf)
        check("target GGUF loads in llama.cpp", llama_load(tgguf)["ok"])
        check_quant_bytes(tdir, tmp)

        d1, d2 = os.path.join(tmp, "draft1"), os.path.join(tmp, "draft2")
        make_draft(tdir, d1, dtype="bf16", seed=6, layers=1, block_size=8, target_layer_ids=[0, 2],
                   heads=4, kv_heads=2, head_dim=64, ffn=512)
        # llama.cpp stores the selector's top-k x (top-k + 1) lattice in a hidden-size row
        make_draft2(tdir, d2, dtype="bf16", seed=7, layers=1, block_size=8, target_layer_ids=[0, 2],
                    heads=4, kv_heads=2, head_dim=64, ffn=512, selector_rank=32, top_k=16)
        for name, d in (("dflash", d1), ("dflash2", d2)):
            for mat in ("same", "q4_0"):
                label = f"{name} {mat}"
                g = write_draft_gguf(d, os.path.join(tmp, f"{name}_{mat}.gguf"), matrices=mat, target_gguf=tgguf)
                kv = kv_dict(g)
                tok = {k: v for k, v in tkv.items() if k.startswith("tokenizer.") and k != "tokenizer.ggml.mask_token_id"}
                check(label + " tokenizer keys == target's", all(kv.get(k) == v for k, v in tok.items()) and len(tok) > 3,
                      str(sorted(tok)))
                cfg = json.load(open(os.path.join(d, "config.json")))
                mask = (cfg.get("dflash_config") or {}).get("mask_token_id", cfg.get("mask_token_id"))
                check(label + " mask token is the draft's", kv.get("tokenizer.ggml.mask_token_id") == mask,
                      f"{kv.get('tokenizer.ggml.mask_token_id')} vs {mask}")
                r = llama_load(g)
                ok = r["ok"] and (name == "dflash" or any("DFlash2 conv kernel" in l for l in r.get("info", [])))
                check(label + " loads in llama.cpp", ok, json.dumps(r)[:600])
                if mat == "same":
                    bad = os.path.join(tmp, f"{name}_noctx.gguf")
                    G.rewrite(g, bad, edit_kv=lambda kv: [e for e in kv if e[0] != "dflash.context_length"])
                    r = llama_load(bad)
                    check(label + " without context_length refused", not r["ok"] and
                          any("dflash.context_length" in l for l in r.get("log", []) + [r.get("error", "")]),
                          json.dumps(r)[:600])

        # dflash's own GGUF draft loader ignores the copied tokenizer: same logits as the folder.
        g = os.path.join(tmp, "dflash_same.gguf")
        outs = []
        for d in (d1, g):
            out = os.path.join(tmp, "dl.bin")
            run([BIN, "draft-logits", "--model", tdir, "--draft", d, "--prompt-ids", PROMPT, "--block-first", "7",
                 "--weights", "bf16", "--out", out])
            outs.append(np.fromfile(out, dtype="<f4"))
        check("dflash reads the v1 file: logits == folder's", outs[0].size > 0 and np.array_equal(*outs),
              f"max|diff| {np.abs(outs[0] - outs[1]).max() if outs[0].shape == outs[1].shape else 'shape'}")
    finish()


if __name__ == "__main__":
    main()
