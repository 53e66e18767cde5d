"""PyTorch reference (and trainable module) of a z-lab DFlash block-diffusion draft.

The draft is a stack of Qwen3 decoder layers without embedding or LM head (it borrows the
target's). Its keys/values are the target's tapped hidden states of the context, projected by
`fc` + `hidden_norm`, followed by the block's own rows; the block's queries attend to all of
them with no mask. See shared/dflash-format.md. Parameter names equal the checkpoint's tensor
names (`fc.weight`, `layers.0.self_attn.q_proj.weight`, ...), so state_dict() is the file.

Math runs in the module's dtype (fp32 by default, `.double()` for a tighter oracle).
"""
import dataclasses
import json
import os
from types import SimpleNamespace
from typing import Optional

import torch
import torch.nn as nn
import torch.nn.functional as F

from . import rope as rope_mod
from .safetensors_io import read_model_tensors, write_model_tensors
from .transformer import MLP, RMSNorm

DFLASH_KEYS = ("block_size", "mask_token_id", "target_layer_ids")


def default_target_layer_ids(n_target_layers, n_draft_layers):
    """The published default taps: one draft layer -> the middle target layer, otherwise L
    ids spread from 1 to N-3. Python's round() is round-half-to-even, which the formula needs
    (N=7, L=3 -> [1, 2, 4], not [1, 3, 4])."""
    n, l = n_target_layers, n_draft_layers
    if l == 1:
        return [n // 2]
    return [int(round(1 + i * (n - 4) / (l - 1))) for i in range(l)]


@dataclasses.dataclass
class DraftConfig:
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    vocab_size: int
    block_size: int
    mask_token_id: int
    target_layer_ids: list
    num_target_layers: int
    rms_norm_eps: float = 1e-6
    rope_theta: float = 1e6
    rope_scaling: Optional[dict] = None
    max_position_embeddings: int = 40960
    causal: bool = False             # dflash_config.causal: causal attention inside the block
    ids_from_formula: bool = False   # the config named no target_layer_ids

    @classmethod
    def from_hf(cls, d, num_target_layers=None):
        """Parse a draft config.json. block_size / mask_token_id / target_layer_ids may sit at
        the top level or in `dflash_config` (that one wins when both have a key).
        num_target_layers: the target's layer count, used when the config lacks it."""
        if "DFlash2DraftModel" in (d.get("architectures") or []) or any(
                t != "full_attention" for t in d.get("layer_types") or []):
            # convolutions, candidate selector, sliding-window layers: not in this reference
            raise NotImplementedError("DFlash2 / sliding-window drafts are not supported here")
        dc = d.get("dflash_config") or {}
        pick = lambda k, default=None: dc.get(k, d.get(k, default))
        n_target = d.get("num_target_layers") or num_target_layers
        layers = d["num_hidden_layers"]
        ids = pick("target_layer_ids")
        from_formula = ids is None
        if from_formula:
            if not n_target:
                raise ValueError("draft config has no target_layer_ids and no num_target_layers")
            ids = default_target_layer_ids(n_target, layers)
        heads = d["num_attention_heads"]
        theta, scaling = d.get("rope_theta", 1e6), d.get("rope_scaling")
        rp = d.get("rope_parameters")  # transformers v5: theta and scaling in one dict
        if rp:
            theta = rp.get("rope_theta", theta)
            if rp.get("rope_type", "default") != "default":
                scaling = rp
        if pick("mask_token_id") is None or pick("block_size") is None:
            raise ValueError("draft config needs mask_token_id and block_size")
        return cls(
            hidden_size=d["hidden_size"], intermediate_size=d["intermediate_size"],
            num_hidden_layers=layers, num_attention_heads=heads,
            num_key_value_heads=d.get("num_key_value_heads") or heads,
            head_dim=d.get("head_dim") or 128,  # Qwen3Config's default
            vocab_size=d["vocab_size"], block_size=int(pick("block_size")),
            mask_token_id=int(pick("mask_token_id")), target_layer_ids=[int(i) for i in ids],
            num_target_layers=int(n_target or max(ids) + 1),
            rms_norm_eps=d.get("rms_norm_eps", 1e-6), rope_theta=float(theta),
            rope_scaling=scaling, max_position_embeddings=d.get("max_position_embeddings", 40960),
            causal=bool(pick("causal", False)), ids_from_formula=from_formula)

    def to_hf(self, style="zlab", write_ids=True, torch_dtype="bfloat16"):
        """config.json dict. style: where block_size / mask_token_id / target_layer_ids go:
        'zlab' (the published Qwen3 drafts): block_size at the top level, the other two in
        dflash_config; 'nested': all three in dflash_config (as the DFlash2 drafts);
        'top': all three at the top level. write_ids=False omits target_layer_ids, leaving
        readers to the default formula."""
        d = {
            "architectures": ["DFlashDraftModel"], "model_type": "qwen3",
            "hidden_size": self.hidden_size, "intermediate_size": self.intermediate_size,
            "num_hidden_layers": self.num_hidden_layers,
            "num_attention_heads": self.num_attention_heads,
            "num_key_value_heads": self.num_key_value_heads, "head_dim": self.head_dim,
            "hidden_act": "silu", "rms_norm_eps": self.rms_norm_eps,
            "rope_theta": self.rope_theta, "rope_scaling": self.rope_scaling,
            "max_position_embeddings": self.max_position_embeddings,
            "vocab_size": self.vocab_size, "attention_bias": False, "attention_dropout": 0.0,
            "tie_word_embeddings": True, "torch_dtype": torch_dtype,
            "num_target_layers": self.num_target_layers,
        }
        keys = {"block_size": self.block_size, "mask_token_id": self.mask_token_id}
        if write_ids:
            keys["target_layer_ids"] = list(self.target_layer_ids)
        if self.causal:
            keys["causal"] = True
        if style == "top":
            d.update(keys)
        elif style == "nested":
            d["dflash_config"] = keys
        elif style == "zlab":
            d["block_size"] = keys.pop("block_size")
            d["dflash_config"] = keys
        else:
            raise ValueError(f"unknown config style {style!r}")
        return d


class DraftAttention(nn.Module):
    """Qwen3 attention whose keys/values are [context rows; block rows]."""

    def __init__(self, cfg):
        super().__init__()
        h, d = cfg.hidden_size, cfg.head_dim
        self.nh, self.nkv, self.d = cfg.num_attention_heads, cfg.num_key_value_heads, d
        self.q_proj = nn.Linear(h, self.nh * d, bias=False)
        self.k_proj = nn.Linear(h, self.nkv * d, bias=False)
        self.v_proj = nn.Linear(h, self.nkv * d, bias=False)
        self.o_proj = nn.Linear(self.nh * d, h, bias=False)
        self.q_norm = RMSNorm(d, cfg.rms_norm_eps)
        self.k_norm = RMSNorm(d, cfg.rms_norm_eps)

    def keys_values(self, x, cos, sin):
        """x [N, T, H] -> RoPE'd keys and values [N, nkv, T, d]."""
        N, T, _ = x.shape
        k = self.k_norm(self.k_proj(x).view(N, T, self.nkv, self.d)).transpose(1, 2)
        v = self.v_proj(x).view(N, T, self.nkv, self.d).transpose(1, 2)
        return rope_mod.apply_rope(k, cos[:, None], sin[:, None]), v

    def forward(self, h, ctx, rope_blk, rope_ctx, mask):
        """h: normed block rows [N, T, H]; ctx: context rows [N, S, H] (not normed again);
        rope_*: (cos, sin) [N, rows, d]; mask: bool [N, T, S+T] (True = may attend) or None."""
        N, T, _ = h.shape
        q = self.q_norm(self.q_proj(h).view(N, T, self.nh, self.d)).transpose(1, 2)
        q = rope_mod.apply_rope(q, rope_blk[0][:, None], rope_blk[1][:, None])
        kc, vc = self.keys_values(ctx, *rope_ctx)
        kb, vb = self.keys_values(h, *rope_blk)
        k, v = torch.cat([kc, kb], 2), torch.cat([vc, vb], 2)
        rep = self.nh // self.nkv  # GQA: query head j reads kv head j // rep
        k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        scores = (q @ k.transpose(-1, -2)) * (self.d ** -0.5)
        if mask is not None:
            scores = scores.masked_fill(~mask[:, None], float("-inf"))
        p = torch.softmax(scores.to(torch.promote_types(scores.dtype, torch.float32)), -1)
        out = (p.to(v.dtype) @ v).transpose(1, 2).reshape(N, T, self.nh * self.d)
        return self.o_proj(out)


class DraftLayer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.input_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.self_attn = DraftAttention(cfg)
        self.post_attention_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        # transformer.MLP reads these four fields; the draft's MLP has no bias
        self.mlp = MLP(SimpleNamespace(hidden_size=cfg.hidden_size, mlp_bias=False, arch="qwen3",
                                       intermediate_size=cfg.intermediate_size))

    def forward(self, x, ctx, rope_blk, rope_ctx, mask):
        x = x + self.self_attn(self.input_layernorm(x), ctx, rope_blk, rope_ctx, mask)
        return x + self.mlp(self.post_attention_layernorm(x))


class DFlashDraft(nn.Module):
    def __init__(self, cfg: DraftConfig):
        super().__init__()
        self.cfg = cfg
        H, k = cfg.hidden_size, len(cfg.target_layer_ids)
        self.fc = nn.Linear(k * H, H, bias=False)
        self.hidden_norm = RMSNorm(H, cfg.rms_norm_eps)
        self.layers = nn.ModuleList(DraftLayer(cfg) for _ in range(cfg.num_hidden_layers))
        self.norm = RMSNorm(H, cfg.rms_norm_eps)
        self.inv_freq, self.attention_factor = rope_mod.rope_parameters(
            cfg.rope_theta, cfg.head_dim, cfg.rope_scaling, cfg.max_position_embeddings)

    @property
    def dtype(self):
        return self.fc.weight.dtype

    def rope(self, positions):
        """(cos, sin) [N, T, d] for integer positions [N, T], computed in float64 like
        rope.cos_sin and then cast."""
        freqs = positions.to(torch.float64)[..., None] * self.inv_freq
        emb = torch.cat([freqs, freqs], -1)
        a = self.attention_factor
        return (emb.cos() * a).to(self.dtype), (emb.sin() * a).to(self.dtype)

    def context(self, features):
        """Target taps [..., k*H] (concatenated in target_layer_ids order) -> ctx rows."""
        return self.hidden_norm(self.fc(features))

    def hidden(self, ctx, ctx_pos, x, blk_pos, mask=None):
        """Final normed hidden states of the block rows.
        ctx [N, S, H], ctx_pos [N, S]; x (embedded block rows) [N, T, H], blk_pos [N, T];
        mask bool [N, T, S+T] or None (all rows see everything: the inference case)."""
        if mask is None and self.cfg.causal:
            N, T, S = x.shape[0], x.shape[1], ctx.shape[1]
            mask = torch.ones(N, T, S + T, dtype=torch.bool)
            mask[:, :, S:] = torch.ones(T, T, dtype=torch.bool).tril()
        rope_blk, rope_ctx = self.rope(blk_pos), self.rope(ctx_pos)
        for layer in self.layers:
            x = layer(x, ctx, rope_blk, rope_ctx, mask)
        return self.norm(x)

    def block_tokens(self, first, block_size=None):
        B = block_size or self.cfg.block_size
        return [int(first)] + [self.cfg.mask_token_id] * (B - 1)

    def block_logits(self, features, first, embed_weight, lm_head_weight, block_size=None,
                     start=None):
        """Inference for one block: features [S, k*H] are the taps of positions 0..S-1, the
        block [first, MASK x (B-1)] sits at start..start+B-1 (start defaults to S).
        Returns logits [B-1, V] of rows 1..B-1 (row j predicts the token at start+j)."""
        S = features.shape[0]
        start = S if start is None else start
        toks = torch.tensor(self.block_tokens(first, block_size))
        B = toks.numel()
        x = F.embedding(toks, embed_weight.to(self.dtype))[None]
        ctx = self.context(features.to(self.dtype))[None]
        h = self.hidden(ctx, torch.arange(S)[None], x, torch.arange(start, start + B)[None])
        return F.linear(h[0, 1:], lm_head_weight.to(self.dtype))


def load_draft(draft_dir, num_target_layers=None, dtype=torch.float32):
    """Read a z-lab draft folder -> (DraftConfig, DFlashDraft in `dtype`, eval mode).
    Stored bf16 values are upcast exactly."""
    with open(os.path.join(draft_dir, "config.json")) as f:
        cfg = DraftConfig.from_hf(json.load(f), num_target_layers)
    model = DFlashDraft(cfg).to(dtype)
    sd = read_model_tensors(draft_dir)
    own = model.state_dict()
    missing = [k for k in own if k not in sd]
    if missing:
        raise KeyError(f"{draft_dir}: missing tensors {missing[:5]}")
    for k, v in own.items():
        if tuple(sd[k].shape) != tuple(v.shape):
            raise ValueError(f"{k}: shape {list(sd[k].shape)} != {list(v.shape)}")
    model.load_state_dict({k: sd[k].to(dtype) for k in own})
    model.eval()
    return cfg, model


def save_draft(out_dir, model, dtype="bf16", style="zlab", write_ids=True):
    """Write config.json + model.safetensors (tensor names without prefix) in z-lab's format.
    dtype: 'bf16' or 'f32'; style / write_ids: see DraftConfig.to_hf."""
    os.makedirs(out_dir, exist_ok=True)
    names = {"bf16": "bfloat16", "f32": "float32"}
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(model.cfg.to_hf(style, write_ids, names[dtype]), f, indent=2)
        f.write("\n")
    sd = {k: v.detach() for k, v in model.state_dict().items()}
    write_model_tensors(out_dir, sd, dtype=dtype)
    return out_dir
