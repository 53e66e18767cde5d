#!/usr/bin/python3
"""Write a random-weight DFlash draft folder (z-lab format) for a given target folder.

  make_draft.py --target DIR --out DIR --layers 2 --block-size 8 --target-layer-ids 1,3 \
      --heads 4 --kv-heads 2 --head-dim 32 --ffn 384 --dtype bf16 --config-style zlab

--config-style: where block_size / mask_token_id / target_layer_ids go: zlab (block_size at
the top level, the others in dflash_config, as the published drafts), nested (all three in
dflash_config), top (all three at the top level).

Without --target-layer-ids the config names none and readers must use the default formula.
Importable: make_draft(target_dir, out_dir, **kwargs) -> (DraftConfig, DFlashDraft).
"""
import argparse
import json
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reference.dflash_draft import DFlashDraft, DraftConfig, default_target_layer_ids, save_draft  # noqa: E402
from reference.transformer import ModelConfig  # noqa: E402

# q_norm/k_norm weights around this value make attention scores ~QK_GAIN^2 times larger than
# unit-variance dot products: attention is peaky, so it depends on RoPE positions, and the
# MASK rows (identical inputs) get clearly different outputs and argmaxes.
QK_GAIN = 3.0
# o_proj/down_proj gain over N(0, 1/fan_in)/sqrt(2L): the layers' output then outweighs the
# (shared) MASK embedding in the residual stream, so different rows get different argmaxes
# (measured on random make_model targets: 1 distinct argmax over 7 rows at gain 1, 4-6 at 4).
RESID_GAIN = 4.0


def target_config(target_dir):
    with open(os.path.join(target_dir, "config.json")) as f:
        return ModelConfig.from_hf(json.load(f))


def spare_token_id(target_dir, vocab):
    """A mask id the tokenizer never produces: the first id past every vocab and added token
    when the embedding is padded (as Qwen3's 151669), else the highest non-added id."""
    used, added = set(), set()
    path = os.path.join(target_dir, "tokenizer.json")
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            tj = json.load(f)
        used = set(tj.get("model", {}).get("vocab", {}).values())
        added = {a["id"] for a in tj.get("added_tokens", [])}
        used |= added
    top = max(used) + 1 if used else vocab
    if top < vocab:
        return top
    return max(i for i in range(vocab) if i not in added)


@torch.no_grad()
def init_random(model, seed):
    """Projections ~ N(0, 1/fan_in), residual writers ~ RESID_GAIN * N(0, 1/fan_in)/sqrt(2L),
    norms ~N(1, 0.1), q/k norms ~N(QK_GAIN, 0.2): every weight matters to the logits."""
    g = torch.Generator().manual_seed(seed)
    L = model.cfg.num_hidden_layers
    for name, p in model.named_parameters():
        r = torch.randn(p.shape, generator=g, dtype=torch.float64)
        if name.endswith(("q_norm.weight", "k_norm.weight")):
            p.copy_(QK_GAIN + 0.2 * r)
        elif name.endswith("norm.weight"):
            p.copy_(1.0 + 0.1 * r)
        elif name.endswith(("o_proj.weight", "down_proj.weight")):
            p.copy_(r / math.sqrt(p.shape[1]) / math.sqrt(2 * L) * RESID_GAIN)
        else:
            p.copy_(r / math.sqrt(p.shape[1]))


def draft_config(tcfg, layers=1, block_size=8, target_layer_ids=None, heads=None, kv_heads=None,
                 head_dim=None, ffn=None, mask_token_id=None, rope_theta=1e6, target_dir=None):
    heads = heads or tcfg.num_attention_heads
    ids = list(target_layer_ids) if target_layer_ids else None
    if mask_token_id is None:
        mask_token_id = spare_token_id(target_dir, tcfg.vocab_size) if target_dir \
            else tcfg.vocab_size - 1
    return DraftConfig(
        hidden_size=tcfg.hidden_size, intermediate_size=ffn or 3 * tcfg.hidden_size,
        num_hidden_layers=layers, num_attention_heads=heads,
        num_key_value_heads=kv_heads or heads, head_dim=head_dim or tcfg.hidden_size // heads,
        vocab_size=tcfg.vocab_size, block_size=block_size, mask_token_id=mask_token_id,
        target_layer_ids=ids or default_target_layer_ids(tcfg.num_hidden_layers, layers),
        num_target_layers=tcfg.num_hidden_layers, rms_norm_eps=tcfg.rms_norm_eps,
        rope_theta=rope_theta, ids_from_formula=ids is None)


def make_draft(target_dir, out_dir, layers=1, block_size=8, target_layer_ids=None, heads=None,
               kv_heads=None, head_dim=None, ffn=None, mask_token_id=None, dtype="f32",
               config_style="zlab", seed=0, rope_theta=1e6):
    tcfg = target_config(target_dir)
    cfg = draft_config(tcfg, layers, block_size, target_layer_ids, heads, kv_heads, head_dim,
                       ffn, mask_token_id, rope_theta, target_dir)
    bad = [i for i in cfg.target_layer_ids if not 0 <= i < tcfg.num_hidden_layers]
    if bad:
        raise ValueError(f"target_layer_ids {bad} outside the target's {tcfg.num_hidden_layers} layers")
    model = DFlashDraft(cfg).double()
    init_random(model, seed)
    save_draft(out_dir, model, dtype=dtype, style=config_style, write_ids=not cfg.ids_from_formula)
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
    ap.add_argument("--dtype", choices=["f32", "bf16"], default="f32")
    ap.add_argument("--config-style", choices=["zlab", "nested", "top"], default="zlab")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    ids = [int(x) for x in a.target_layer_ids.split(",")] if a.target_layer_ids else None
    cfg, _ = make_draft(a.target, a.out, a.layers, a.block_size, ids, a.heads, a.kv_heads,
                        a.head_dim, a.ffn, a.mask_token_id, a.dtype, a.config_style, a.seed,
                        a.rope_theta)
    print(json.dumps({"out": a.out, "layers": cfg.num_hidden_layers,
                      "target_layer_ids": cfg.target_layer_ids, "mask_token_id": cfg.mask_token_id,
                      "block_size": cfg.block_size}))


if __name__ == "__main__":
    main()
