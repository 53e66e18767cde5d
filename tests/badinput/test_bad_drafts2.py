#!/usr/bin/python3
"""DFlash2 drafts that are inconsistent or do not fit are refused with one clear error line
before any generation: v1/v2 parts mixed either way, truncated codebooks, a kernel projection
sized for another conv_group_size, selector_top_k past the vocabulary, a base kernel of the
wrong shape, a sliding layer without a window, hidden size not divisible by the group. The
well-formed draft loads and generates. Run under ASan."""
import json
import os
import shutil
import subprocess
import sys
import tempfile

SRC = os.environ.get("DFLASH_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(SRC, "tools"))
from reference.safetensors_io import read_safetensors, write_safetensors  # noqa: E402

BIN = os.environ.get("DFLASH_ASAN_BIN") or os.environ["DFLASH_BIN"]
if "DFLASH_ASAN_BIN" not in os.environ:
    print("warning: DFLASH_ASAN_BIN not set, running without AddressSanitizer")
TARGET = os.path.join(SRC, "tests", "data", "random_pair", "target")
V1 = os.path.join(SRC, "tests", "data", "random_pair", "draft")
V2 = os.path.join(SRC, "tests", "data", "random_pair2", "draft")
passed = failed = 0


def generate(draft_dir):
    return subprocess.run([BIN, "generate", "--model", TARGET, "--draft", draft_dir, "--prompt-ids", "1,2,3",
                           "--max-tokens", "4", "--json"], capture_output=True, text=True, timeout=120)


def run_case(name, draft_dir, keyword):
    global passed, failed
    r = generate(draft_dir)
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


def edit_tensors(d, fn):
    p = os.path.join(d, "model.safetensors")
    t = read_safetensors(p)
    fn(t)
    write_safetensors(p, t)


with tempfile.TemporaryDirectory() as tmp:
    def copy(name, src=V2):
        d = os.path.join(tmp, name)
        shutil.copytree(src, d)
        return d

    r = generate(V2)
    ok = r.returncode == 0 and json.loads(r.stdout)["dflash"]["speculation"] == "on" and "AddressSanitizer" not in r.stderr
    print(("PASS" if ok else "FAIL") + f" well-formed DFlash2 draft generates: rc={r.returncode}")
    passed += ok
    failed += not ok

    d = copy("v1_config_v2_tensors")
    edit_config(d, lambda c: (c.update(architectures=["DFlashDraftModel"]),
                              [c["dflash_config"].pop(k) for k in ("conv_kernel_size", "conv_group_size",
                                                                    "selector_rank", "selector_top_k")]))
    run_case("v1 config over v2 tensors", d, "mixes")

    d = copy("v1_with_v2_keys", V1)
    edit_config(d, lambda c: c.setdefault("dflash_config", {}).update(selector_top_k=16))
    run_case("v1 config with a v2 key", d, "mixes")

    d = copy("v2_config_v1_tensors", V1)
    edit_config(d, lambda c: c.update(architectures=["DFlash2DraftModel"]))
    run_case("v2 config over v1 tensors", d, "DFlash2")

    d = copy("truncated_codebook")
    edit_tensors(d, lambda t: t.update({"candidate_selector.successor_codebook":
                                        t["candidate_selector.successor_codebook"][:300].contiguous()}))
    run_case("truncated successor codebook", d, "successor_codebook")

    d = copy("wrong_group")
    edit_config(d, lambda c: c["dflash_config"].update(conv_group_size=32))
    run_case("kernel projection sized for group 16, config says 32", d, "kernel_projection")

    d = copy("topk_too_big")
    edit_config(d, lambda c: c["dflash_config"].update(selector_top_k=5000))
    run_case("selector_top_k past the vocabulary", d, "selector_top_k")

    d = copy("bad_base_kernel")
    edit_tensors(d, lambda t: t.update({"layers.0.mlp_conv.base_kernel":
                                        t["layers.0.mlp_conv.base_kernel"][:, :1].contiguous()}))
    run_case("base kernel with one tap for kernel size 2", d, "base_kernel")

    d = copy("no_window")
    edit_config(d, lambda c: c.pop("sliding_window"))
    run_case("sliding layer without sliding_window", d, "sliding_window")

    d = copy("group_not_divisor")
    edit_config(d, lambda c: c["dflash_config"].update(conv_group_size=48))
    run_case("hidden size not a multiple of conv_group_size", d, "conv_group_size")

    d = copy("missing_selector")
    edit_tensors(d, lambda t: t.pop("candidate_selector.hidden_projection.weight"))
    run_case("missing selector projection", d, "hidden_projection")

print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
