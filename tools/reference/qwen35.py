"""Plain PyTorch reference of the Qwen3.5 / Qwen3.6 hybrid text stack (`qwen3_5` /
`qwen3_5_text`): Gated DeltaNet ("linear_attention") layers and gated full-attention layers.

Follows ../shared/qwen35-format.md (cited below as "fmt §x.y"); written from that
document's formulas, not from any implementation. It is an oracle: readable, float64 or
float32, and the Gated DeltaNet recurrence always runs sequentially, one position at a time
(fmt §3.4 "For bitwise prefill/verify/decode equality, use the sequential recurrence").

Entry points
  load_hf_folder(dir, dtype, state_dtype) -> (Qwen35Config, Qwen35Model)
  model.forward(ids, state=None, return_hidden=False)  all rows at once (continuing `state`)
  model.forward_stepwise(ids, state=None)   one row at a time, snapshot of the State after each
  model.greedy(prompt, n)                   greedy continuation (prefill, then one row per step)
  model.new_state()                         empty per-sequence state (KV, conv rows, GDN state)

Parameter names are the HF names without the decoder prefix (`embed_tokens.weight`,
`layers.N.linear_attn.A_log`, `norm.weight`, `lm_head.weight` when untied);
`hf_state_dict(form)` / `load_hf_state_dict` translate to and from checkpoint names for the
two HF forms: multimodal `model.language_model.` and text-only `model.` (fmt §2.1);
`load_hf_state_dict` also reads Qwen3-Next's fused linear projections (fmt §1.3, form
"qwen3-next", written by tools/make_qwen35.py) by unpacking them.
"""
import copy
import dataclasses
import json
import os
from typing import List, Optional

import torch
import torch.nn as nn
import torch.nn.functional as F

from .safetensors_io import read_model_tensors

# fmt §1.1: the two outer forms.
FORMS = {
    "multimodal": {"arch": "Qwen3_5ForConditionalGeneration", "model_type": "qwen3_5",
                   "prefix": "model.language_model."},
    "causal-lm": {"arch": "Qwen3_5ForCausalLM", "model_type": "qwen3_5_text",
                  "prefix": "model."},
    # fmt §1.3: Qwen3-Next's dense form, flat config, fused in_proj_qkvz / in_proj_ba.
    "qwen3-next": {"arch": "Qwen3NextForCausalLM", "model_type": "qwen3_next",
                   "prefix": "model."},
}
# fmt §1.3: the fused linear-attention projections of the qwen3-next form.
FUSED_QKVZ, FUSED_BA = "linear_attn.in_proj_qkvz.weight", "linear_attn.in_proj_ba.weight"
# fmt §2.1: tensors a text-only forward ignores (HF ignores ^mtp.* and ^model.visual.*).
SKIPPED_PREFIXES = ("mtp.", "model.visual.")
# fmt §2.1: MLX conversions have +1 folded into the zero-centered norms and conv1d reshaped;
# reading them here would add 1 twice, so they are refused rather than guessed.
REFUSED_PREFIXES = ("language_model.model.",)


@dataclasses.dataclass
class Qwen35Config:
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    layer_types: List[str]
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    linear_num_key_heads: int
    linear_num_value_heads: int
    linear_key_head_dim: int
    linear_value_head_dim: int
    linear_conv_kernel_dim: int = 4
    rms_norm_eps: float = 1e-6
    rope_theta: float = 1e7
    partial_rotary_factor: float = 0.25
    tie_word_embeddings: bool = False
    form: str = "causal-lm"
    bos_token_id: Optional[int] = None
    eos_token_id: object = None

    @property
    def rotary_dim(self):
        # fmt §3.3: R = int(hd * partial_rotary_factor)
        return int(self.head_dim * self.partial_rotary_factor)

    @property
    def conv_dim(self):
        # fmt §2.3: C = 2*nk*dk + nv*dv
        return (2 * self.linear_num_key_heads * self.linear_key_head_dim
                + self.linear_num_value_heads * self.linear_value_head_dim)

    @classmethod
    def from_hf(cls, d):
        """Parse config.json. fmt §1.1: with `text_config` the text keys live there
        (multimodal form); without it the whole file is the text config."""
        archs = d.get("architectures") or []
        if d.get("model_type") == "qwen3_next" or "Qwen3NextForCausalLM" in archs:
            form, text = "qwen3-next", dict(d)
            # HF Qwen3NextConfig: num_experts defaults to 512; layer l is MoE iff l not in
            # mlp_only_layers and (l+1) % decoder_sparse_step == 0. Dense only here.
            if d.get("num_experts", 512) > 0:
                step, only = d.get("decoder_sparse_step", 1), set(d.get("mlp_only_layers") or [])
                if any(l not in only and (step <= 0 or (l + 1) % step == 0)
                       for l in range(d["num_hidden_layers"])):
                    raise ValueError("mixture-of-experts Qwen3-Next: not in this reference")
        elif "text_config" in d:
            form, text = "multimodal", dict(d["text_config"])
            if d.get("model_type") not in (None, "qwen3_5") or \
                    text.get("model_type") not in (None, "qwen3_5_text"):
                raise ValueError(f"not a qwen3_5 config: {d.get('model_type')}")
        else:
            form, text = "causal-lm", dict(d)
            if d.get("model_type") not in ("qwen3_5_text", "qwen3_5"):
                raise ValueError(f"not a qwen3_5_text config: {d.get('model_type')}")
        if archs and not set(archs) & {v["arch"] for v in FORMS.values()}:
            raise ValueError(f"unsupported architectures {archs}")
        g = text.get
        L = g("num_hidden_layers")
        types = g("layer_types")
        if types is None:
            # fmt §1.2: without layer_types, layer i is full iff (i+1) % interval == 0.
            interval = g("full_attention_interval", 4)
            types = ["full_attention" if (i + 1) % interval == 0 else "linear_attention"
                     for i in range(L)]
        if len(types) != L or set(types) - {"full_attention", "linear_attention"}:
            raise ValueError(f"bad layer_types {types}")
        # fmt §1.2: rope_theta and partial_rotary_factor in rope_parameters; older configs put
        # them at the top level of the text config.
        rp = g("rope_parameters") or {}
        if rp.get("rope_type", "default") != "default":
            raise ValueError(f"unsupported rope_type {rp.get('rope_type')}")
        theta = rp.get("rope_theta", g("rope_theta", 1e7))
        prf = rp.get("partial_rotary_factor", g("partial_rotary_factor", 0.25))
        # Reading of fmt §1.1/§1.2 (not stated there): in the multimodal form
        # tie_word_embeddings is a top-level key; we take the top-level value when present,
        # else text_config's (HF's outer model reads the outer config's flag).
        tie = d.get("tie_word_embeddings", g("tie_word_embeddings", False))
        if form != "multimodal":
            tie = g("tie_word_embeddings", False)
        return cls(
            vocab_size=g("vocab_size"), hidden_size=g("hidden_size"),
            intermediate_size=g("intermediate_size"), num_hidden_layers=L, layer_types=list(types),
            num_attention_heads=g("num_attention_heads"),
            num_key_value_heads=g("num_key_value_heads"), head_dim=g("head_dim", 256),
            linear_num_key_heads=g("linear_num_key_heads"),
            linear_num_value_heads=g("linear_num_value_heads"),
            linear_key_head_dim=g("linear_key_head_dim"),
            linear_value_head_dim=g("linear_value_head_dim"),
            linear_conv_kernel_dim=g("linear_conv_kernel_dim", 4),
            rms_norm_eps=g("rms_norm_eps", 1e-6), rope_theta=float(theta),
            partial_rotary_factor=float(prf), tie_word_embeddings=bool(tie), form=form,
            bos_token_id=g("bos_token_id"), eos_token_id=g("eos_token_id"))


# ---------------------------------------------------------------------------------------
# Norms (fmt §3.1)

def _compute_dtype(x):
    return torch.promote_types(x.dtype, torch.float32)


class ZeroCenteredRMSNorm(nn.Module):
    """y = x / sqrt(mean(x^2) + eps) * (1 + w), w stored as is (init 0). fmt §3.1: used by
    input_layernorm, post_attention_layernorm, the final norm, q_norm and k_norm. The +1 is
    applied here and only here; the stored weight is never modified on load."""

    def __init__(self, dim, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(dim))
        self.eps = eps

    def forward(self, x):
        xf = x.to(_compute_dtype(x))
        n = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return (n * (1.0 + self.weight.to(xf.dtype))).to(x.dtype)


class GatedRMSNorm(nn.Module):
    """linear_attn.norm, fmt §3.1: y = w * (o / sqrt(mean(o^2) + eps)) * SiLU(z), plain w
    (init 1, no +1), one weight vector of length dv shared by every value head."""

    def __init__(self, dim, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, o, z):
        of = o.to(_compute_dtype(o))
        n = of * torch.rsqrt(of.pow(2).mean(-1, keepdim=True) + self.eps)
        zf = z.to(of.dtype)
        return (self.weight.to(of.dtype) * n * (zf * torch.sigmoid(zf))).to(o.dtype)


# ---------------------------------------------------------------------------------------
# Per-sequence state (fmt §3.5)

class State:
    """Everything a sequence carries between calls: `pos` rows consumed so far; per
    full-attention layer the post-norm, post-RoPE keys and plain values [nKV, pos, hd]; per
    linear layer the last K-1 pre-conv rows m [K-1, C] (zeros at start) and the recurrent
    state S [nv, dk, dv] (HF/FLA layout, zeros at start) in `state_dtype`."""

    def __init__(self, cfg, dtype, state_dtype):
        self.pos = 0
        self.layers = []
        for t in cfg.layer_types:
            if t == "full_attention":
                e = torch.zeros(cfg.num_key_value_heads, 0, cfg.head_dim, dtype=dtype)
                self.layers.append({"k": e, "v": e.clone()})
            else:
                self.layers.append({
                    "conv": torch.zeros(cfg.linear_conv_kernel_dim - 1, cfg.conv_dim, dtype=dtype),
                    "rec": torch.zeros(cfg.linear_num_value_heads, cfg.linear_key_head_dim,
                                       cfg.linear_value_head_dim, dtype=state_dtype)})

    def clone(self):
        """An independent snapshot (tensors copied)."""
        return copy.deepcopy(self)


# ---------------------------------------------------------------------------------------
# RoPE (fmt §3.3)

def inv_freq_fp32(theta, rotary_dim):
    """inv_freq_i = 1 / theta^(2i/R), i < R/2, computed in fp32 as fmt §3.3 says."""
    exps = torch.arange(0, rotary_dim, 2, dtype=torch.int64).to(torch.float32) / rotary_dim
    return 1.0 / (torch.tensor(theta, dtype=torch.float32) ** exps)


def apply_partial_rope(x, positions, inv_freq, dtype):
    """x [heads, T, hd]; NeoX rotate-half inside the first R dims, dims R.. unchanged.
    fmt §3.3: for text input the three mRoPE position rows (T, H, W) all equal the token
    position, so the interleaved mRoPE recomposition is exactly this plain RoPE.
    Angles p * inv_freq_i are formed in `dtype` from the fp32 inv_freq."""
    R = 2 * inv_freq.shape[0]
    ang = positions.to(dtype)[:, None] * inv_freq.to(dtype)[None, :]  # [T, R/2]
    cos, sin = ang.cos(), ang.sin()
    x1, x2, rest = x[..., :R // 2], x[..., R // 2:R], x[..., R:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin, rest], dim=-1)


# ---------------------------------------------------------------------------------------
# Mixers

class GatedAttention(nn.Module):
    """Full-attention layer, fmt §3.3 (shapes fmt §2.2)."""

    def __init__(self, cfg):
        super().__init__()
        H, hd = cfg.hidden_size, cfg.head_dim
        self.nh, self.nkv, self.hd = cfg.num_attention_heads, cfg.num_key_value_heads, hd
        self.q_proj = nn.Linear(H, self.nh * 2 * hd, bias=False)  # query|gate per head
        self.k_proj = nn.Linear(H, self.nkv * hd, bias=False)
        self.v_proj = nn.Linear(H, self.nkv * hd, bias=False)
        self.o_proj = nn.Linear(self.nh * hd, H, bias=False)
        self.q_norm = ZeroCenteredRMSNorm(hd, cfg.rms_norm_eps)
        self.k_norm = ZeroCenteredRMSNorm(hd, cfg.rms_norm_eps)

    def forward(self, u, st, pos0, inv_freq):
        T, hd = u.shape[0], self.hd
        # 1. q_proj rows: for head h, [h*2hd, h*2hd+hd) query, [h*2hd+hd, (h+1)*2hd) gate.
        P = self.q_proj(u).view(T, self.nh, 2 * hd)
        q, gate = P[..., :hd], P[..., hd:]
        # 2. per-head zero-centered norms before RoPE.
        q = self.q_norm(q)
        k = self.k_norm(self.k_proj(u).view(T, self.nkv, hd))
        v = self.v_proj(u).view(T, self.nkv, hd)
        q, k, v = q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1)  # [heads, T, hd]
        # 3. partial RoPE at absolute positions pos0 .. pos0+T-1.
        pos = torch.arange(pos0, pos0 + T)
        q = apply_partial_rope(q, pos, inv_freq, u.dtype)
        k = apply_partial_rope(k, pos, inv_freq, u.dtype)
        st["k"] = torch.cat([st["k"], k], dim=1)
        st["v"] = torch.cat([st["v"], v], dim=1)
        # 4. GQA: query head h reads KV head h // (nH/nKV); scale hd^-1/2; causal: the query
        # at absolute position p attends to keys 0..p; softmax in (at least) fp32.
        rep = self.nh // self.nkv
        K = st["k"].repeat_interleave(rep, dim=0)  # [nH, pos0+T, hd]
        V = st["v"].repeat_interleave(rep, dim=0)
        rows = []
        for t in range(T):
            p = pos0 + t
            scores = torch.einsum("hkd,hd->hk", K[:, :p + 1], q[:, t]) * (hd ** -0.5)
            w = torch.softmax(scores.to(_compute_dtype(scores)), dim=-1).to(V.dtype)
            rows.append(torch.einsum("hk,hkd->hd", w, V[:, :p + 1]))
        o = torch.stack(rows).reshape(T, self.nh * hd)  # head-major
        # 5. output gate: o * sigmoid(gate), gate flattened in the same head-major order.
        o = o * torch.sigmoid(gate.reshape(T, self.nh * hd))
        return self.o_proj(o)


def l2_normalize(x, eps=1e-6):
    """fmt §3.4 step 6: x / sqrt(sum(x^2) + 1e-6) over the last axis."""
    return x * torch.rsqrt(x.pow(2).sum(-1, keepdim=True) + eps)


def gated_delta_recurrence(q, k, v, alpha, beta, S):
    """The Gated DeltaNet recurrence of fmt §3.4 step 7, strictly sequential.
    q, k [T, nv, dk] (already mapped to value heads, normalized, q scaled); v [T, nv, dv];
    alpha, beta [T, nv]; S [nv, dk, dv] initial state (not modified).
    Returns (o [T, nv, dv], S after the last row). All math in S's dtype.
    For each row t and value head j:
        S <- alpha_t S;  m = S^T k_t;  delta = beta_t (v_t - m);  S <- S + k_t delta^T;
        o_t = S^T q_t   (readout after the update)."""
    dt = S.dtype
    q, k, v, alpha, beta = (x.to(dt) for x in (q, k, v, alpha, beta))
    S = S.clone()
    outs = []
    for t in range(q.shape[0]):
        S = alpha[t][:, None, None] * S
        m = torch.einsum("jid,ji->jd", S, k[t])
        delta = beta[t][:, None] * (v[t] - m)
        S = S + k[t][:, :, None] * delta[:, None, :]
        outs.append(torch.einsum("jid,ji->jd", S, q[t]))
    return torch.stack(outs), S


class GatedDeltaNet(nn.Module):
    """Linear-attention layer, fmt §3.4 (shapes fmt §2.3)."""

    def __init__(self, cfg):
        super().__init__()
        H = cfg.hidden_size
        self.nk, self.nv = cfg.linear_num_key_heads, cfg.linear_num_value_heads
        self.dk, self.dv = cfg.linear_key_head_dim, cfg.linear_value_head_dim
        self.K, C = cfg.linear_conv_kernel_dim, cfg.conv_dim
        if self.nv % self.nk:
            raise ValueError(f"linear_num_value_heads {self.nv} not a multiple of "
                             f"linear_num_key_heads {self.nk}")
        self.in_proj_qkv = nn.Linear(H, C, bias=False)
        self.in_proj_z = nn.Linear(H, self.nv * self.dv, bias=False)
        self.in_proj_b = nn.Linear(H, self.nv, bias=False)
        self.in_proj_a = nn.Linear(H, self.nv, bias=False)
        # Only its weight [C, 1, K] is used (depthwise, no bias); the taps are applied below.
        self.conv1d = nn.Conv1d(C, C, self.K, groups=C, bias=False)
        self.A_log = nn.Parameter(torch.zeros(self.nv))
        self.dt_bias = nn.Parameter(torch.ones(self.nv))
        self.norm = GatedRMSNorm(self.dv, cfg.rms_norm_eps)
        self.out_proj = nn.Linear(self.nv * self.dv, H, bias=False)

    def forward(self, u, st):
        T, nk, nv, dk, dv, K = u.shape[0], self.nk, self.nv, self.dk, self.dv, self.K
        # 1. projections.
        m = self.in_proj_qkv(u)                       # [T, C]
        z = self.in_proj_z(u).view(T, nv, dv)
        b = self.in_proj_b(u)                         # [T, nv]
        a = self.in_proj_a(u)
        # 2. causal depthwise conv over all C channels, then SiLU:
        #    c_t = sum_{j<K} w[j] * m_{t-(K-1)+j}, rows before the sequence from the conv state.
        xs = torch.cat([st["conv"], m], dim=0)        # [K-1+T, C]
        w = self.conv1d.weight[:, 0, :]               # [C, K]
        c = sum(w[:, j] * xs[j:j + T] for j in range(K))
        st["conv"] = xs[xs.shape[0] - (K - 1):].clone()
        c = F.silu(c)
        # 3. split q | k | v, head-major inside each part.
        q = c[:, :nk * dk].reshape(T, nk, dk)
        k = c[:, nk * dk:2 * nk * dk].reshape(T, nk, dk)
        v = c[:, 2 * nk * dk:].reshape(T, nv, dv)
        # 4. beta = sigmoid(b); g = -exp(A_log) * softplus(a + dt_bias) (PyTorch softplus:
        #    x for x > 20); alpha = exp(g).
        beta = torch.sigmoid(b)
        g = -torch.exp(self.A_log.to(a.dtype)) * F.softplus(a + self.dt_bias.to(a.dtype))
        alpha = torch.exp(g)
        # 5. grouped mapping: value head j uses key head j // (nv/nk).
        r = nv // nk
        q, k = q.repeat_interleave(r, dim=1), k.repeat_interleave(r, dim=1)
        # 6. L2-normalize per head, then scale q by dk^-1/2.
        q = l2_normalize(q) * (dk ** -0.5)
        k = l2_normalize(k)
        # 7. sequential recurrence from the carried state.
        o, st["rec"] = gated_delta_recurrence(q, k, v, alpha, beta, st["rec"])
        o = o.to(u.dtype)
        # 8. gated norm per value head, concatenated in value-head order, out_proj.
        y = self.norm(o, z).reshape(T, nv * dv)
        return self.out_proj(y)


class MLP(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        H, I = cfg.hidden_size, cfg.intermediate_size
        self.gate_proj = nn.Linear(H, I, bias=False)
        self.up_proj = nn.Linear(H, I, bias=False)
        self.down_proj = nn.Linear(I, H, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):
    """fmt §3.2: h = x + Mixer(norm_in(x)); x' = h + MLP(norm_post(h))."""

    def __init__(self, cfg, kind):
        super().__init__()
        self.kind = kind
        self.input_layernorm = ZeroCenteredRMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        if kind == "full_attention":
            self.self_attn = GatedAttention(cfg)
        else:
            self.linear_attn = GatedDeltaNet(cfg)
        self.post_attention_layernorm = ZeroCenteredRMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.mlp = MLP(cfg)

    def forward(self, x, st, pos0, inv_freq):
        u = self.input_layernorm(x)
        if self.kind == "full_attention":
            h = x + self.self_attn(u, st, pos0, inv_freq)
        else:
            h = x + self.linear_attn(u, st)
        return h + self.mlp(self.post_attention_layernorm(h))


class Qwen35Model(nn.Module):
    def __init__(self, cfg: Qwen35Config, state_dtype=None):
        super().__init__()
        self.cfg = cfg
        self.state_dtype = state_dtype  # None: float32 for a float32 model, else model dtype
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.layers = nn.ModuleList(DecoderLayer(cfg, t) for t in cfg.layer_types)
        self.norm = ZeroCenteredRMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        if not cfg.tie_word_embeddings:
            self.lm_head = nn.Linear(cfg.hidden_size, cfg.vocab_size, bias=False)
        self.inv_freq = inv_freq_fp32(cfg.rope_theta, cfg.rotary_dim)  # not a parameter

    @property
    def dtype(self):
        return self.embed_tokens.weight.dtype

    def output_weight(self):
        return self.embed_tokens.weight if self.cfg.tie_word_embeddings else self.lm_head.weight

    def new_state(self):
        sd = self.state_dtype or torch.promote_types(self.dtype, torch.float32)
        return State(self.cfg, self.dtype, sd)

    @torch.no_grad()
    def forward(self, ids, state=None, return_hidden=False):
        """Run rows `ids` (1-D, or [1, T]) at positions state.pos .. state.pos+T-1, all at once,
        updating `state` in place (a fresh one when None). Returns logits [T, V], and with
        return_hidden also the list of per-layer outputs [T, H]: hidden[i] is the residual
        stream after layer i's MLP add, before the final norm (= HF hidden_states[i+1],
        fmt §5 "tapped hidden states")."""
        ids = torch.as_tensor(ids).reshape(-1)
        st = state if state is not None else self.new_state()
        x = self.embed_tokens(ids)  # no scaling (fmt §3.2)
        hidden = []
        for layer, ls in zip(self.layers, st.layers):
            x = layer(x, ls, st.pos, self.inv_freq)
            hidden.append(x)
        st.pos += ids.shape[0]
        logits = F.linear(self.norm(x), self.output_weight())
        return (logits, hidden) if return_hidden else logits

    @torch.no_grad()
    def forward_stepwise(self, ids, state=None):
        """The same rows one at a time, carrying conv state, recurrent state and KV cache.
        Returns (logits [T, V], hidden list [T, H] per layer, snapshots) where snapshots[t] is
        an independent copy of the State after row t (its pos is t+1 past the start), for
        rollback / per-position-snapshot tests (fmt §6)."""
        ids = torch.as_tensor(ids).reshape(-1)
        st = state if state is not None else self.new_state()
        rows, hid, snaps = [], [], []
        for t in range(ids.shape[0]):
            lg, h = self.forward(ids[t:t + 1], st, return_hidden=True)
            rows.append(lg)
            hid.append(h)
            snaps.append(st.clone())
        hidden = [torch.cat([h[i] for h in hid]) for i in range(len(self.layers))]
        return torch.cat(rows), hidden, snaps

    @torch.no_grad()
    def greedy(self, prompt, n):
        """n greedy tokens after `prompt` (argmax; ties -> lowest id, as torch.argmax):
        prefill the prompt at once, then one row per generated token."""
        st = self.new_state()
        logits = self.forward(torch.as_tensor(list(prompt)), st)
        out = []
        for _ in range(n):
            nxt = int(torch.argmax(logits[-1]))
            out.append(nxt)
            if len(out) < n:
                logits = self.forward(torch.tensor([nxt]), st)
        return out

    # ---- checkpoint names (fmt §2.1) ----

    def hf_state_dict(self, form="causal-lm"):
        prefix = FORMS[form]["prefix"]
        return {(k if k == "lm_head.weight" else prefix + k): v
                for k, v in self.state_dict().items()}

    def load_hf_state_dict(self, sd):
        """Load checkpoint tensors (any float dtype per tensor, fmt §2.6), converted to this
        module's dtype. mtp.* and model.visual.* are skipped; lm_head.weight is ignored when
        tied; any other unexpected tensor, a missing one or a wrong shape raises."""
        for p in REFUSED_PREFIXES:
            if any(k.startswith(p) for k in sd):
                raise ValueError(f"tensors under {p!r}: an MLX conversion (norms already +1, "
                                 "conv1d [C,K,1]); this reference reads HF checkpoints only")
        if "model.language_model.embed_tokens.weight" in sd:
            prefix = "model.language_model."
        elif "model.embed_tokens.weight" in sd:
            prefix = "model."
        else:
            raise KeyError("no embed_tokens.weight under model.language_model. or model.")
        sd = self.unfuse_linear_projections(sd)
        own = self.state_dict()
        new, used = {}, set()
        for k, v in own.items():
            name = k if k == "lm_head.weight" else prefix + k
            if name not in sd:
                raise KeyError(f"missing tensor {name}")
            if tuple(sd[name].shape) != tuple(v.shape):
                raise ValueError(f"{name}: shape {list(sd[name].shape)} != {list(v.shape)}")
            new[k] = sd[name].to(v.dtype)
            used.add(name)
        for name in sd:
            if name in used or name.startswith(SKIPPED_PREFIXES):
                continue
            if name == "lm_head.weight" and self.cfg.tie_word_embeddings:
                continue
            raise KeyError(f"unexpected tensor {name}")
        self.load_state_dict(new)
        return prefix


    def unfuse_linear_projections(self, sd):
        """fmt §1.3: a qwen3-next checkpoint stores each linear layer's in_proj_qkv/z/b/a as
        in_proj_qkvz [2*nk*dk + 2*nv*dv, H], rows per key head g: q_g (dk) | k_g (dk) |
        v_g (r*dv) | z_g (r*dv), and in_proj_ba [2*nv, H], per g: b_g (r) | a_g (r), r = nv/nk.
        Returns sd with those pairs replaced by the four separate tensors (value head g*r + j,
        fmt §2.3 order); a layer with one of the pair, or with both forms, raises."""
        cfg = self.cfg
        nk, nv = cfg.linear_num_key_heads, cfg.linear_num_value_heads
        dk, dv, r = cfg.linear_key_head_dim, cfg.linear_value_head_dim, nv // nk
        out = dict(sd)
        for name in sd:
            if not name.endswith(FUSED_QKVZ):
                continue
            base = name[:-len(FUSED_QKVZ)] + "linear_attn."
            qkvz, ba = out.pop(name), out.pop(base + "in_proj_ba.weight", None)
            if ba is None:
                raise KeyError(f"missing tensor {base}in_proj_ba.weight beside {name}")
            H = qkvz.shape[-1]
            if tuple(qkvz.shape) != (2 * nk * dk + 2 * nv * dv, H) or tuple(ba.shape) != (2 * nv, H):
                raise ValueError(f"{name}: fused shapes {list(qkvz.shape)}, {list(ba.shape)}")
            for sep in ("in_proj_qkv", "in_proj_z", "in_proj_b", "in_proj_a"):
                if base + sep + ".weight" in out:
                    raise KeyError(f"both {name} and {base}{sep}.weight")
            q, k, v, z = torch.split(qkvz.reshape(nk, -1, H), [dk, dk, r * dv, r * dv], dim=1)
            b, a = torch.split(ba.reshape(nk, 2 * r, H), [r, r], dim=1)
            out[base + "in_proj_qkv.weight"] = torch.cat(
                [q.reshape(nk * dk, H), k.reshape(nk * dk, H), v.reshape(nv * dv, H)])
            out[base + "in_proj_z.weight"] = z.reshape(nv * dv, H)
            out[base + "in_proj_b.weight"] = b.reshape(nv, H)
            out[base + "in_proj_a.weight"] = a.reshape(nv, H)
        if any(n.endswith("linear_attn.in_proj_ba.weight") for n in out):
            raise KeyError("in_proj_ba without its in_proj_qkvz")
        return out


def load_hf_folder(model_dir, dtype=torch.float32, state_dtype=None):
    """config.json + (sharded) safetensors -> (Qwen35Config, Qwen35Model in `dtype`).
    Stored bf16 values upcast exactly. state_dtype: dtype of the GDN recurrent state (default
    float32 for a float32 model, float64 for a float64 model)."""
    with open(os.path.join(model_dir, "config.json")) as f:
        cfg = Qwen35Config.from_hf(json.load(f))
    model = Qwen35Model(cfg, state_dtype).to(dtype)
    model.load_hf_state_dict(read_model_tensors(model_dir))
    model.eval()
    return cfg, model


def main(argv=None):
    """Print greedy continuation / last-row logits of a checkpoint folder (for quick looks):
      /usr/bin/python3 -m reference.qwen35 DIR --ids 1,2,3 --greedy 8   (from tools/)"""
    import argparse
    ap = argparse.ArgumentParser(description="Qwen3.5 hybrid reference forward")
    ap.add_argument("model_dir")
    ap.add_argument("--ids", required=True, help="comma-separated token ids")
    ap.add_argument("--greedy", type=int, default=8)
    ap.add_argument("--f64", action="store_true", help="float64 weights, activations and state")
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    _, model = load_hf_folder(a.model_dir, torch.float64 if a.f64 else torch.float32)
    ids = [int(t) for t in a.ids.split(",")]
    last = model(torch.tensor(ids))[-1]
    top = torch.topk(last, 5)
    print(json.dumps({"top5_ids": top.indices.tolist(),
                      "top5_logits": [round(v, 6) for v in top.values.tolist()],
                      "greedy": model.greedy(ids, a.greedy)}))


if __name__ == "__main__":
    main()
