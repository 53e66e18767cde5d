#!/usr/bin/python3
"""A draft that does not fit its target is refused with a clear one-line error before any
generation: wrong hidden size, wrong vocabulary, tapped layers past the target's depth, a mask
id outside the embedding, a DFlash2 checkpoint, a missing draft tensor. Run under ASan."""
import json
import os
import shutil
import subprocess
import sys
import tempfile

SRC = os.environ.get("DFLASH_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(SRC, "tools"))
from make_draft import make_draft  # noqa: E402
from make_model import make_model  # noqa: E402
from reference.safetensors_io import read_safetensors, write_safetensors  # noqa: E402

BIN = os.environ.get("DFLASH_ASAN_BIN") or os.environ["DFLASH_BIN"]
if "DFLASH_ASAN_BIN" not in os.environ:
    print("warning: DFLASH_ASAN_BIN not set, running without AddressSanitizer")
PAIR = os.path.join(SRC, "tests", "data", "random_pair")
TARGET = os.path.join(PAIR, "target")
passed = failed = 0


def run_case(name, draft_dir, keyword):
    global passed, failed
    r = subprocess.run([BIN, "generate", "--model", TARGET, "--draft", draft_dir, "--prompt-ids", "1,2,3",
                        "--max-tokens", "4", "--json"], capture_output=True, text=True, timeout=120)
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    ok = (r.returncode == 1 and not r.stdout.strip() and len(lines) == 1 and lines[0].startswith("dflash: error: ")
          and keyword in lines[0] and "AddressSanitizer" not in r.stderr)
    print(("PASS " if ok else "FAIL ") + name + ": " + (lines[0] if lines else f"rc={r.returncode} no stderr"))
    passed += ok
    failed += not ok


def edit_config(d, fn):
    p = os.path.join(d, "config.json")
    cfg = json.load(open(p))
    fn(cfg)
    json.dump(cfg, open(p, "w"), indent=1)


with tempfile.TemporaryDirectory() as tmp:
    def copy(name):
        d = os.path.join(tmp, name)
        shutil.copytree(os.path.join(PAIR, "draft"), d)
        return d

    # A draft trained for a different target: hidden 192 instead of 128.
    other = os.path.join(tmp, "other_target")
    make_model(other, arch="qwen3", hidden=192, layers=3, heads=4, kv_heads=2, head_dim=48, ffn=256, vocab=384,
               dtype="bf16", seed=3)
    wrong_hidden = os.path.join(tmp, "wrong_hidden")
    make_draft(other, wrong_hidden, layers=1, block_size=4)
    run_case("hidden size mismatch", wrong_hidden, "hidden_size")

    d = copy("wrong_vocab")
    edit_config(d, lambda c: c.update(vocab_size=999))
    run_case("vocab mismatch", d, "vocab_size")

    d = copy("deep_tap")
    edit_config(d, lambda c: c.setdefault("dflash_config", {}).update(target_layer_ids=[1, 7]))
    run_case("tapped layer past the target's depth", d, "target layer id 7")

    d = copy("mask_out")
    edit_config(d, lambda c: c.setdefault("dflash_config", {}).update(mask_token_id=5000))
    run_case("mask id outside the embedding", d, "mask_token_id")

    d = copy("layers_mismatch")
    edit_config(d, lambda c: c.update(num_target_layers=36))
    run_case("draft made for a deeper target", d, "num_target_layers")

    d = copy("v2")
    edit_config(d, lambda c: c.update(architectures=["DFlash2DraftModel"]))
    run_case("DFlash2 checkpoint", d, "DFlash2")

    d = copy("missing_fc")
    p = os.path.join(d, "model.safetensors")
    t = read_safetensors(p)
    del t["fc.weight"]
    write_safetensors(p, t)
    run_case("missing fc tensor", d, "fc.weight")

    d = copy("wrong_fc_shape")
    p = os.path.join(d, "model.safetensors")
    t = read_safetensors(p)
    t["fc.weight"] = t["fc.weight"][:, :64].contiguous()
    write_safetensors(p, t)
    run_case("fc of the wrong shape", d, "shape")

    d = copy("no_mask")
    edit_config(d, lambda c: (c.pop("mask_token_id", None), c.get("dflash_config", {}).pop("mask_token_id", None)))
    run_case("no mask token id", d, "mask_token_id")

print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
