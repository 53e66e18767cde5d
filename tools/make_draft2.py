#!/usr/bin/python3
"""Write a random-weight DFlash2 draft folder (DFlash2DraftModel) for a given target folder.

  make_draft2.py --target DIR --out DIR --layers 2 --block-size 8 --conv-kernel 2 \
      --conv-group 16 --selector-rank 64 --top-k 16 [--softcap 30] [--multiplier 0.5] \
      [--embed-scale 1.5] [--sliding-window 4 [--causal|--bidirectional]] --dtype bf16

The v1 options (--heads, --kv-heads, --head-dim, --ffn, --target-layer-ids, ...) are
make_draft.py's. --minimal-config leaves out the optional keys at their defaults.
Importable: make_draft2(target_dir, out_dir, **kwargs) -> (Draft2Config, DFlash2Draft).
"""
import argparse
import json
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_draft import draft_config, init_random, target_config  # noqa: E402
from reference.dflash2_draft import DFlash2Draft, Draft2Config, save_draft2  # noqa: E402

# Edge scores ~ EDGE_GAIN * N(0, 1) per candidate: comparable to the spread of the top-k
# logits of these random drafts, so the selector often overrides the argmax (a test that it
# is applied) without making the logits irrelevant.
EDGE_GAIN = 1.5
CONV_GAIN = 0.3  # spread of the non-identity taps, static and dynamic


@torch.no_grad()
def init_random2(model, seed):
    init_random(model, seed)  # v1 parts; the v2 parts are overwritten below
    g = torch.Generator().manual_seed(seed + 1000)
    R = model.cfg2.selector_rank
    for name, p in model.named_parameters():
        r = torch.randn(p.shape, generator=g, dtype=torch.float64)
        if name.endswith("base_kernel"):
            # near identity at tap 0, so the convolutions perturb rather than scramble
            v = CONV_GAIN * r
            v[:, 0] += 1.0
            p.copy_(v)
        elif name.endswith("kernel_projection.weight"):
            p.copy_(CONV_GAIN * r / math.sqrt(p.shape[1]))
        elif name.endswith("_codebook"):
            p.copy_(r * math.sqrt(EDGE_GAIN) / R ** 0.25)


def make_draft2(target_dir, out_dir, layers=1, block_size=8, target_layer_ids=None, heads=None,
                kv_heads=None, head_dim=None, ffn=None, mask_token_id=None, dtype="f32", seed=0,
                rope_theta=1e6, conv_kernel=2, conv_group=16, selector_rank=64, top_k=16,
                softcap=None, multiplier=1.0, embed_scale=1.0, sliding_window=None,
                is_causal=None, minimal_config=False):
    tcfg = target_config(target_dir)
    base = draft_config(tcfg, layers, block_size, target_layer_ids, heads, kv_heads, head_dim,
                        ffn, mask_token_id, rope_theta, target_dir)
    cfg = Draft2Config(base=base, conv_kernel_size=conv_kernel, conv_group_size=conv_group,
                       selector_rank=selector_rank, selector_top_k=top_k,
                       input_embedding_scale=embed_scale, output_multiplier=multiplier,
                       final_logit_softcapping=softcap,
                       layer_types=["sliding_attention"] * layers if sliding_window else None,
                       sliding_window=sliding_window, is_causal=is_causal)
    model = DFlash2Draft(cfg).double()
    init_random2(model, seed)
    save_draft2(out_dir, model, dtype=dtype, write_defaults=not minimal_config)
    return cfg, model


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("--target", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--layers", type=int, default=1)
    ap.add_argument("--block-size", type=int, default=8)
    ap.add_argument("--target-layer-ids", help="comma-separated; omitted -> default formula")
    ap.add_argument("--heads", type=int)
    ap.add_argument("--kv-heads", type=int)
    ap.add_argument("--head-dim", type=int)
    ap.add_argument("--ffn", type=int)
    ap.add_argument("--mask-token-id", type=int)
    ap.add_argument("--rope-theta", type=float, default=1e6)
    ap.add_argument("--conv-kernel", type=int, default=2)
    ap.add_argument("--conv-group", type=int, default=16)
    ap.add_argument("--selector-rank", type=int, default=64)
    ap.add_argument("--top-k", type=int, default=16)
    ap.add_argument("--softcap", type=float)
    ap.add_argument("--multiplier", type=float, default=1.0)
    ap.add_argument("--embed-scale", type=float, default=1.0)
    ap.add_argument("--sliding-window", type=int)
    c = ap.add_mutually_exclusive_group()
    c.add_argument("--causal", dest="is_causal", action="store_true", default=None)
    c.add_argument("--bidirectional", dest="is_causal", action="store_false")
    ap.add_argument("--minimal-config", action="store_true")
    ap.add_argument("--dtype", choices=["f32", "bf16"], default="f32")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    ids = [int(x) for x in a.target_layer_ids.split(",")] if a.target_layer_ids else None
    cfg, _ = make_draft2(a.target, a.out, a.layers, a.block_size, ids, a.heads, a.kv_heads,
                         a.head_dim, a.ffn, a.mask_token_id, a.dtype, a.seed, a.rope_theta,
                         a.conv_kernel, a.conv_group, a.selector_rank, a.top_k, a.softcap,
                         a.multiplier, a.embed_scale, a.sliding_window, a.is_causal,
                         a.minimal_config)
    print(json.dumps({"out": a.out, "layers": cfg.num_hidden_layers,
                      "target_layer_ids": cfg.target_layer_ids, "mask_token_id": cfg.mask_token_id,
                      "block_size": cfg.block_size, "top_k": cfg.selector_top_k}))


if __name__ == "__main__":
    main()
