#!/usr/bin/python3
"""dflash graft against the PyTorch reference (tools/reference, Hugging Face semantics, float64):
the grown qwen3-graft-test target computes the small demo target's function there too, not
only in dflash's own forward. In float64 the only difference left is the per-head norms' eps
(docs/graft.md): a few 1e-7 of the logit scale; padding logits sit far below the live ones.
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
from reference.transformer import load_hf_folder  # noqa: E402

LIVE_V = 4032
failed = 0
with tempfile.TemporaryDirectory() as tmp:
    subprocess.run([BIN, "graft", "--shape", "qwen3-graft-test", "--out", tmp, "--dtype", "f32"], check=True,
                   capture_output=True)
    _, small = load_hf_folder(os.path.join(SRC, "models", "demo", "target"), torch.float64)
    _, big = load_hf_folder(os.path.join(tmp, "target"), torch.float64)
    ids = torch.tensor([[4000, 100, 200, 300, 17, 2000, 3000, 5, 9, 1234, 999, 4001, 50, 7, 3999, 12]])
    with torch.no_grad():
        ls, lb = small(ids)[0], big(ids)[0]
    rel = ((lb[:, :LIVE_V] - ls).abs().max(dim=1).values / ls.abs().max(dim=1).values).max().item()
    gap = (lb[:, :LIVE_V].max(dim=1).values - lb[:, LIVE_V:].max(dim=1).values).min().item()
    for name, ok in [(f"reference logits of the grown target within 1e-6 relative (worst {rel:.3g})", rel <= 1e-6),
                     ("the same argmax at every position", bool((lb.argmax(1) == ls.argmax(1)).all())),
                     (f"padding logits >= 1000 below the live maximum (smallest gap {gap:.3g})", gap >= 1000)]:
        print(("PASS " if ok else "FAIL ") + name)
        failed += not ok
sys.exit(1 if failed else 0)
