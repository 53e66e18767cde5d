"""PyTorch reference (and trainable module) of a DFlash2 draft (DFlash2DraftModel).

DFlash2 = the DFlash draft (dflash_draft.py) plus
  * per layer, two short convolutions over the block rows (attention_conv, mlp_conv): a
    per-channel static base kernel plus a per-position, per-group dynamic kernel from one
    projection of the sublayer's normed input; side 0 convolves the sublayer input, side 1 its
    output; taps before the block's anchor are zero (context rows are never convolved);
  * a candidate selector replacing the argmax: top-k of the logits per row, re-scored by
    <pred_codebook[prev] * hidden_projection(h), succ_codebook[cand]> where prev is the token
    chosen for the row before (the anchor for the first), walked left to right;
  * attention per layer_types: full or (symmetric, or causal) sliding window;
  * input_embedding_scale, output_multiplier, final_logit_softcapping.
See shared/dflash-format.md (DFlash2). Parameter names are the checkpoint's tensor names.
"""
import dataclasses
import json
import os
from typing import Optional

import torch
import torch.nn as nn
import torch.nn.functional as F

from .dflash_draft import DraftAttention, DraftConfig, DFlashDraft, DraftLayer
from .safetensors_io import read_model_tensors, write_model_tensors

V2_KEYS = ("conv_kernel_size", "conv_group_size", "selector_rank", "selector_top_k")


@dataclasses.dataclass
class Draft2Config:
    base: DraftConfig                 # everything v1 has
    conv_kernel_size: int = 2
    conv_group_size: int = 16
    selector_rank: int = 256
    selector_top_k: int = 16
    input_embedding_scale: float = 1.0
    output_multiplier: float = 1.0
    final_logit_softcapping: Optional[float] = None
    layer_types: Optional[list] = None  # None: all full_attention
    sliding_window: Optional[int] = None
    is_causal: Optional[bool] = None    # None: causal exactly on the sliding layers

    def __getattr__(self, k):  # v1 fields read through (cfg.hidden_size, ...)
        if k == "base":
            raise AttributeError(k)
        return getattr(self.base, k)

    def layer_window(self, i):
        """(window or 0 for none, causal) of draft layer i."""
        t = (self.layer_types or ["full_attention"] * self.base.num_hidden_layers)[i]
        sliding = t == "sliding_attention"
        causal = self.is_causal if self.is_causal is not None else sliding
        return (self.sliding_window if sliding else 0), bool(causal)

    @classmethod
    def from_hf(cls, d, num_target_layers=None):
        if "DFlash2DraftModel" not in (d.get("architectures") or []):
            raise ValueError("not a DFlash2DraftModel config")
        v1 = dict(d, architectures=["DFlashDraftModel"])
        v1.pop("layer_types", None)
        base = DraftConfig.from_hf(v1, num_target_layers)
        dc = d.get("dflash_config") or {}
        pick = lambda k, default=None: dc.get(k, d.get(k, default))
        causal = d.get("is_causal", pick("is_causal", pick("causal")))
        return cls(base=base, conv_kernel_size=int(pick("conv_kernel_size", 2)),
                   conv_group_size=int(pick("conv_group_size", 16)),
                   selector_rank=int(pick("selector_rank", 256)),
                   selector_top_k=int(pick("selector_top_k", 16)),
                   input_embedding_scale=float(pick("input_embedding_scale", 1.0)),
                   output_multiplier=float(pick("output_multiplier", 1.0)),
                   final_logit_softcapping=pick("final_logit_softcapping"),
                   layer_types=d.get("layer_types"), sliding_window=d.get("sliding_window"),
                   is_causal=causal)

    def to_hf(self, torch_dtype="bfloat16", write_defaults=True):
        """config.json in the published DFlash2 layout: the dflash keys in dflash_config.
        write_defaults=False leaves out the optional keys at their defaults (readers must
        apply them)."""
        d = self.base.to_hf("nested", not self.base.ids_from_formula, torch_dtype)
        d["architectures"] = ["DFlash2DraftModel"]
        d.pop("rope_theta")
        d["rope_parameters"] = {"rope_type": "default", "rope_theta": self.base.rope_theta}
        dc = d["dflash_config"]
        dc.pop("causal", None)
        dc.update(conv_kernel_size=self.conv_kernel_size, conv_group_size=self.conv_group_size,
                  selector_rank=self.selector_rank, selector_top_k=self.selector_top_k)
        opt = {"input_embedding_scale": (self.input_embedding_scale, 1.0),
               "output_multiplier": (self.output_multiplier, 1.0),
               "final_logit_softcapping": (self.final_logit_softcapping, None)}
        for k, (v, default) in opt.items():
            if write_defaults or v != default:
                d[k] = v
        if self.layer_types is not None:
            d["layer_types"] = list(self.layer_types)
            d["sliding_window"] = self.sliding_window
        if self.is_causal is not None:
            d["is_causal"] = bool(self.is_causal)
        return d


class BlockConv(nn.Module):
    """The two-sided dynamic convolution around one sublayer."""

    def __init__(self, H, K, group):
        super().__init__()
        self.K, self.group, self.G = K, group, H // group
        self.base_kernel = nn.Parameter(torch.zeros(2, K, H))
        self.kernel_projection = nn.Linear(H, 2 * K * self.G, bias=False)

    def prepare(self, hn):
        """hn [N, T, H] normed sublayer input -> dynamic taps [N, T, 2, K, G]
        (projection rows ordered (side*K + tap)*G + g)."""
        N, T, _ = hn.shape
        return self.kernel_projection(hn).view(N, T, 2, self.K, self.G)

    def apply(self, x, dyn, side, valid=None):
        """out[t] = sum_tap (base[side, tap] + dyn[t, side, tap] per group) * x[t - tap].
        Rows before the block's start count as zero. valid: optional bool [N, T, K], False
        where row t - tap lies outside t's block (training packs several blocks per row)."""
        T = x.shape[1]
        out = torch.zeros_like(x)
        for tap in range(self.K):
            if tap >= T:
                break
            shifted = F.pad(x, (0, 0, tap, 0))[:, :T]
            w = self.base_kernel[side, tap] + dyn[:, :, side, tap].repeat_interleave(self.group, -1)
            term = w * shifted
            if valid is not None:
                term = term * valid[:, :, tap, None].to(term.dtype)
            out = out + term
        return out


class Draft2Layer(DraftLayer):
    def __init__(self, cfg):
        super().__init__(cfg.base)
        self.attention_conv = BlockConv(cfg.hidden_size, cfg.conv_kernel_size, cfg.conv_group_size)
        self.mlp_conv = BlockConv(cfg.hidden_size, cfg.conv_kernel_size, cfg.conv_group_size)

    def forward(self, x, ctx, rope_blk, rope_ctx, mask, valid=None):
        hn = self.input_layernorm(x)
        dyn = self.attention_conv.prepare(hn)
        o = self.self_attn(self.attention_conv.apply(hn, dyn, 0, valid), ctx, rope_blk, rope_ctx, mask)
        x = x + self.attention_conv.apply(o, dyn, 1, valid)
        hn = self.post_attention_layernorm(x)
        dyn = self.mlp_conv.prepare(hn)
        o = self.mlp(self.mlp_conv.apply(hn, dyn, 0, valid))
        return x + self.mlp_conv.apply(o, dyn, 1, valid)


class CandidateSelector(nn.Module):
    def __init__(self, H, V, R):
        super().__init__()
        self.hidden_projection = nn.Linear(H, R, bias=False)
        self.predecessor_codebook = nn.Parameter(torch.zeros(V, R))
        self.successor_codebook = nn.Parameter(torch.zeros(V, R))

    def edge(self, prev, hp, cand):
        """prev [...], hp [..., R], cand [..., k] -> edge scores [..., k]."""
        w = self.predecessor_codebook[prev] * hp
        return (self.successor_codebook[cand] * w[..., None, :]).sum(-1)


def candidates(logits, k):
    """Top-k ids per row, by descending logit, equal logits by ascending id."""
    order = torch.sort(logits, dim=-1, descending=True, stable=True).indices
    return order[..., :k]


class DFlash2Draft(DFlashDraft):
    def __init__(self, cfg: Draft2Config):
        super().__init__(cfg.base)
        self.cfg2 = cfg
        self.layers = nn.ModuleList(Draft2Layer(cfg) for _ in range(cfg.num_hidden_layers))
        self.candidate_selector = CandidateSelector(cfg.hidden_size, cfg.vocab_size, cfg.selector_rank)

    def layer_masks(self, ctx_pos, blk_pos, mask=None):
        """Per layer: bool [N, T, S+T] (True = may attend) from its window / causality, and'ed
        with `mask`; None where a layer sees everything and no mask is given."""
        kpos = torch.cat([ctx_pos, blk_pos], 1)
        dq = blk_pos[:, :, None] - kpos[:, None, :]
        out = []
        for i in range(self.cfg.num_hidden_layers):
            win, causal = self.cfg2.layer_window(i)
            m = mask
            if win or causal:
                lm = torch.ones_like(dq, dtype=torch.bool)
                if win:
                    lm &= dq.abs() < win
                if causal:
                    lm &= dq >= 0
                m = lm if m is None else (m & lm)
            out.append(m)
        return out

    def hidden(self, ctx, ctx_pos, x, blk_pos, mask=None, valid=None):
        """Final normed hidden states of the block rows (see DFlashDraft.hidden); x is the
        embedded block before input_embedding_scale; valid: see BlockConv.apply."""
        x = x * self.cfg2.input_embedding_scale
        rope_blk, rope_ctx = self.rope(blk_pos), self.rope(ctx_pos)
        for layer, m in zip(self.layers, self.layer_masks(ctx_pos, blk_pos, mask)):
            x = layer(x, ctx, rope_blk, rope_ctx, m, valid)
        return self.norm(x)

    def logits_of(self, h, lm_head_weight):
        logits = F.linear(h, lm_head_weight.to(self.dtype)) * self.cfg2.output_multiplier
        cap = self.cfg2.final_logit_softcapping
        return cap * torch.tanh(logits / cap) if cap else logits

    def block(self, features, first, embed_weight, lm_head_weight, block_size=None, start=None):
        """One inference block -> (normed hidden [B-1, H], logits [B-1, V]) of rows 1..B-1."""
        S = features.shape[0]
        start = S if start is None else start
        toks = torch.tensor(self.block_tokens(first, block_size))
        B = toks.numel()
        x = F.embedding(toks, embed_weight.to(self.dtype))[None]
        ctx = self.context(features.to(self.dtype))[None]
        h = self.hidden(ctx, torch.arange(S)[None], x, torch.arange(start, start + B)[None])[0, 1:]
        return h, self.logits_of(h, lm_head_weight)

    def block_logits(self, features, first, embed_weight, lm_head_weight, block_size=None, start=None):
        return self.block(features, first, embed_weight, lm_head_weight, block_size, start)[1]

    @torch.no_grad()
    def propose_tokens(self, features, first, embed_weight, lm_head_weight, block_size=None):
        """The B-1 greedy proposals of one block (what the decode loop verifies)."""
        h, logits = self.block(features, first, embed_weight, lm_head_weight, block_size)
        return self.walk(first, h, logits)[0]

    @torch.no_grad()
    def walk(self, anchor, h, logits, temperature=0.0, uniforms=None):
        """The selector over rows h [T, H] / logits [T, V] after `anchor`.
        Returns (tokens [T], cand [T, k], q [T, k] or None, scores [T, k] of the walk taken).
        All edge scores are computed first, for every (candidate of t-1, candidate of t)."""
        k = self.cfg2.selector_top_k
        cand = candidates(logits, k)
        hp = self.candidate_selector.hidden_projection(h)
        T = cand.shape[0]
        prevs = torch.cat([torch.full((1, k), int(anchor)), cand[:-1]], 0)  # row 0: anchor only
        edges = self.candidate_selector.edge(prevs, hp[:, None, :].expand(T, k, -1),
                                             cand[:, None, :].expand(T, k, k))  # [T, k prev, k]
        tokens, qs, scores, prev = [], [], [], 0
        for t in range(T):
            s = logits[t, cand[t]] + edges[t, prev]
            scores.append(s)
            if temperature and temperature > 0:
                p = torch.softmax(s.double() / temperature, -1)
                cum, pick = 0.0, 0
                for j in range(k):
                    if p[j] <= 0:
                        continue
                    cum += float(p[j])
                    pick = j
                    if uniforms[t] < cum:
                        break
                qs.append(p)
            else:
                pick = int(torch.argmax(s))  # first maximum: the lowest candidate index
            tokens.append(int(cand[t, pick]))
            prev = pick
        q = torch.stack(qs) if qs else None
        return tokens, cand, q, torch.stack(scores)


def load_draft2(draft_dir, num_target_layers=None, dtype=torch.float32):
    with open(os.path.join(draft_dir, "config.json")) as f:
        cfg = Draft2Config.from_hf(json.load(f), num_target_layers)
    model = DFlash2Draft(cfg).to(dtype)
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


def save_draft2(out_dir, model, dtype="bf16", write_defaults=True):
    os.makedirs(out_dir, exist_ok=True)
    names = {"bf16": "bfloat16", "f32": "float32"}
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(model.cfg2.to_hf(names[dtype], write_defaults), f, indent=2)
        f.write("\n")
    write_model_tensors(out_dir, {k: v.detach() for k, v in model.state_dict().items()}, dtype=dtype)
    return out_dir
