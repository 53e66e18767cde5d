#!/usr/bin/python3
"""Mean next-token loss of the exported (bf16) demo target on fixed, non-overlapping
256-token windows of each stream (raw source / chat, train / held-out).
  /usr/bin/python3 tools/demo/evaluate.py [--dir models/demo/target] [--windows 48]"""
import argparse, os, sys
import torch
import torch.nn.functional as F
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import corpus  # noqa: E402
sys.path.insert(0, os.path.join(corpus.REPO, "tools"))
from reference.transformer import load_hf_folder  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--dir", default=os.path.join(corpus.REPO, "models/demo/target"))
ap.add_argument("--windows", type=int, default=48)
args = ap.parse_args()
torch.set_num_threads(1)
_, model = load_hf_folder(args.dir)
streams = corpus.token_streams(args.dir)
T = 256
with torch.no_grad():
    for name in ("train", "heldout", "chat_train", "chat_heldout"):
        s = torch.from_numpy(streams[name].astype("int64"))
        stride = (len(s) - T - 1) // args.windows    # evenly spread over the whole stream
        rows = torch.stack([s[i * stride:i * stride + T + 1] for i in range(args.windows)])
        losses = []
        for b in rows.split(8):
            logits = model(b[:, :-1])
            losses.append(F.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                          b[:, 1:].reshape(-1), reduction="sum"))
        print(f"{name:13s} loss {float(sum(losses)) / (args.windows * T):.3f} nats/token")
