#!/usr/bin/python3
"""dflash graft against the PyTorch reference (tools/reference, Hugging Face semantics, float64):
the grown qwen3-graft-test target computes the small demo target's function there too, not
only in dflash's own forward, and the grown qwen3.5-graft-test target the small hybrid demo's
(tools/reference/qwen35.py). In float64 the only differences left are the per-head norms' eps
and, in the hybrid, the padding constant's bf16 rounding in the hidden norms (docs/graft.md): a
few 1e-7 of the logit scale; padding logits sit far below the live ones.
"""
import os
import subprocess
import sys
import tempfile

import torch

SRC = os.environ.get("DFLASH_SOURCE_DIR") or os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
BIN = os.environ.get("DFLASH_BIN") or os.path.join(SRC, "build", "dflash")
sys.path.insert(0, os.path.join(SRC, "tools"))
from reference.qwen35 import load_hf_folder as load_qwen35  # noqa: E402
from reference.transformer import load_hf_folder  # noqa: E402

LIVE_V = 4032
failed = 0
CASES = [("qwen3-graft-test", "demo", load_hf_folder, lambda m, ids: m(ids)[0]),
         ("qwen3.5-graft-test", "demo35", load_qwen35, lambda m, ids: m(ids.reshape(-1)))]
for shape, demo, load, forward in CASES:
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([BIN, "graft", "--shape", shape, "--out", tmp, "--dtype", "f32"], check=True, capture_output=True)
        _, small = load(os.path.join(SRC, "models", demo, "target"), torch.float64)
        _, big = load(os.path.join(tmp, "target"), torch.float64)
        ids = torch.tensor([[4000, 100, 200, 300, 17, 2000, 3000, 5, 9, 1234, 999, 4001, 50, 7, 3999, 12]])
        with torch.no_grad():
            ls, lb = forward(small, ids), forward(big, ids)
        rel = ((lb[:, :LIVE_V] - ls).abs().max(dim=1).values / ls.abs().max(dim=1).values).max().item()
        gap = (lb[:, :LIVE_V].max(dim=1).values - lb[:, LIVE_V:].max(dim=1).values).min().item()
        for name, ok in [(f"{shape}: reference logits of the grown target within 1e-6 relative (worst {rel:.3g})",
                          rel <= 1e-6),
                         (f"{shape}: the same argmax at every position", bool((lb.argmax(1) == ls.argmax(1)).all())),
                         (f"{shape}: padding logits >= 1000 below the live maximum (smallest gap {gap:.3g})",
                          gap >= 1000)]:
            print(("PASS " if ok else "FAIL ") + name)
            failed += not ok
sys.exit(1 if failed else 0)
