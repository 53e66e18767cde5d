#!/usr/bin/python3
"""Greedy samples from the exported demo target, through the PyTorch reference reading the
bf16 safetensors (upcast exactly to fp32) -- the same numbers the engine loads.
  /usr/bin/python3 tools/demo/sample.py [--dir models/demo/target] [-n 80] [prompt ...]
Qwen3.5 hybrid folders (models/demo35/target) run through reference/qwen35.py.
A prompt starting with "chat:" is wrapped in the chat template (enable_thinking=False)."""
import argparse, os, sys
import torch
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import corpus  # noqa: E402
sys.path.insert(0, os.path.join(corpus.REPO, "tools"))
from reference.transformer import load_hf_folder  # noqa: E402
from reference import qwen35  # noqa: E402
from draft_target_qwen35 import is_qwen35  # noqa: E402

DEFAULT = ["def parse_args(", "import os\n\nclass ", "    def __init__(self, name",
           "chat:Write a Python function `quote` from the `shlex` module."]

ap = argparse.ArgumentParser()
ap.add_argument("--dir", default=os.path.join(corpus.REPO, "models/demo/target"))
ap.add_argument("-n", type=int, default=80)
ap.add_argument("prompts", nargs="*")
args = ap.parse_args()
torch.set_num_threads(1)
tok = corpus.Tokenizer(os.path.join(args.dir, "tokenizer.json"))
# a Qwen3.5 hybrid folder (models/demo35/target) runs through reference/qwen35.py
_, model = (qwen35.load_hf_folder if is_qwen35(args.dir) else load_hf_folder)(args.dir)
stops = {tok.added["<|im_end|>"], tok.added["<|endoftext|>"]}
for p in args.prompts or DEFAULT:
    text = corpus.render_chat(p[5:]) if p.startswith("chat:") else p
    ids = tok.encode(text)
    out = []
    for t in model.greedy(ids, args.n):      # stop at eos like the engine would
        out.append(t)
        if t in stops:
            break
    print("=" * 30, repr(p), f"({len(ids)} prompt ids -> {len(out)} ids)")
    print(text + tok.decode(out))
