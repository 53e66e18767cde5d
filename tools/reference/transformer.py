"""Plain PyTorch reference of Qwen3ForCausalLM, Qwen2ForCausalLM and LlamaForCausalLM.

Parameter names are the HF names without the decoder prefix: `embed_tokens.weight`,
`layers.{i}.self_attn.q_proj.weight`, ..., `norm.weight`, plus `lm_head.weight` when untied.
`hf_state_dict(prefix)` / `load_hf_state_dict` translate to and from the HF checkpoint names.
Math is whatever dtype the module is in (fp32 by default; `.double()` for a tighter oracle).
"""
import dataclasses
import json
import os
from typing import Optional

import torch
import torch.nn as nn
import torch.nn.functional as F

from . import rope as rope_mod
from .safetensors_io import read_model_tensors

ARCHS = {"Qwen3ForCausalLM": "qwen3", "Qwen2ForCausalLM": "qwen2", "LlamaForCausalLM": "llama"}
ARCH_NAMES = {v: k for k, v in ARCHS.items()}
# Decoder prefixes seen in real checkpoints, and where each puts lm_head.
PREFIXES = {
    "model.": "lm_head.weight",                                # *ForCausalLM
    "language_model.model.": "language_model.lm_head.weight",  # Llava-style VLMs
    "model.language_model.": "lm_head.weight",                 # newer transformers VLM layout
}


@dataclasses.dataclass
class ModelConfig:
    arch: str  # qwen3 | qwen2 | llama
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    rms_norm_eps: float = 1e-6
    rope_theta: float = 10000.0
    rope_scaling: Optional[dict] = None
    max_position_embeddings: int = 4096
    tie_word_embeddings: bool = False
    attention_bias: bool = False  # qkv (+o for llama/qwen3) biases
    mlp_bias: bool = False        # llama only
    bos_token_id: Optional[int] = None
    eos_token_id: object = None

    @property
    def qkv_bias(self):
        return self.arch == "qwen2" or self.attention_bias

    @property
    def o_bias(self):
        return self.arch != "qwen2" and self.attention_bias

    @classmethod
    def from_hf(cls, d):
        """Parse an HF config.json dict; text keys may sit in a nested `text_config`."""
        text = dict(d.get("text_config") or {})
        merged = {**{k: v for k, v in d.items() if k != "text_config"}, **text}
        arch = None
        for a in d.get("architectures") or []:
            arch = arch or ARCHS.get(a)
        for mt in (text.get("model_type"), d.get("model_type")):
            if arch is None and mt in ARCH_NAMES:
                arch = mt
        if arch is None:
            raise ValueError(f"unsupported architecture {d.get('architectures')}")
        g = merged.get
        heads = g("num_attention_heads")
        head_dim = g("head_dim")
        if head_dim is None:
            # Qwen3Config defaults head_dim to 128; Llama/Qwen2 derive it from the hidden size.
            head_dim = 128 if arch == "qwen3" else g("hidden_size") // heads
        theta, scaling = g("rope_theta", 10000.0), g("rope_scaling")
        rp = g("rope_parameters")  # transformers v5 spelling: theta and scaling in one dict
        if rp:
            theta = rp.get("rope_theta", theta)
            if rp.get("rope_type", "default") != "default":
                scaling = rp
        return cls(
            arch=arch, vocab_size=g("vocab_size"), hidden_size=g("hidden_size"),
            intermediate_size=g("intermediate_size"), num_hidden_layers=g("num_hidden_layers"),
            num_attention_heads=heads, num_key_value_heads=g("num_key_value_heads") or heads,
            head_dim=head_dim, rms_norm_eps=g("rms_norm_eps", 1e-6), rope_theta=float(theta),
            rope_scaling=scaling, max_position_embeddings=g("max_position_embeddings", 4096),
            tie_word_embeddings=bool(g("tie_word_embeddings", False)),
            attention_bias=bool(g("attention_bias", False)), mlp_bias=bool(g("mlp_bias", False)),
            bos_token_id=g("bos_token_id"), eos_token_id=g("eos_token_id"))


def quantize_activations(x):
    """What dflash does to a matmul input when the weights are block-quantized (q8/q4): each
    row, in blocks of 32, becomes integers round-half-even(x * 127 / max|x|) times max|x| / 127."""
    xb = x.reshape(*x.shape[:-1], x.shape[-1] // 32, 32)
    amax = xb.abs().amax(-1, keepdim=True)
    q = torch.where(amax > 0, torch.round(xb * (127 / amax)), torch.zeros_like(xb)).clamp(-127, 127)
    return (q * (amax / 127)).reshape(x.shape)


class Linear(nn.Linear):
    """nn.Linear that can emulate the engine's int8 activations (Transformer.act_quant)."""
    quantize_input = False

    def forward(self, x):
        return super().forward(quantize_activations(x) if self.quantize_input else x)


class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        # HF: normalize in fp32 (at least), then multiply by the weight.
        xf = x.to(torch.promote_types(x.dtype, torch.float32))
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * xf.to(x.dtype)


class Attention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        h, d = cfg.hidden_size, cfg.head_dim
        self.nh, self.nkv, self.d = cfg.num_attention_heads, cfg.num_key_value_heads, d
        self.q_proj = Linear(h, self.nh * d, bias=cfg.qkv_bias)
        self.k_proj = Linear(h, self.nkv * d, bias=cfg.qkv_bias)
        self.v_proj = Linear(h, self.nkv * d, bias=cfg.qkv_bias)
        self.o_proj = Linear(self.nh * d, h, bias=cfg.o_bias)
        if cfg.arch == "qwen3":
            self.q_norm = RMSNorm(d, cfg.rms_norm_eps)
            self.k_norm = RMSNorm(d, cfg.rms_norm_eps)

    def forward(self, x, cos, sin):
        B, T, _ = x.shape
        q = self.q_proj(x).view(B, T, self.nh, self.d)
        k = self.k_proj(x).view(B, T, self.nkv, self.d)
        v = self.v_proj(x).view(B, T, self.nkv, self.d)
        if hasattr(self, "q_norm"):  # Qwen3: per-head RMSNorm before RoPE
            q, k = self.q_norm(q), self.k_norm(k)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))  # [B, heads, T, d]
        q, k = rope_mod.apply_rope(q, cos, sin), rope_mod.apply_rope(k, cos, sin)
        rep = self.nh // self.nkv  # GQA: query head j reads kv head j // rep
        k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        scores = (q @ k.transpose(-1, -2)) * (self.d ** -0.5)
        causal = torch.ones(T, T, dtype=torch.bool).tril()
        scores = scores.masked_fill(~causal, float("-inf"))
        p = torch.softmax(scores.to(torch.promote_types(scores.dtype, torch.float32)), -1)
        out = (p.to(v.dtype) @ v).transpose(1, 2).reshape(B, T, self.nh * self.d)
        return self.o_proj(out)


class MLP(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        h, i, b = cfg.hidden_size, cfg.intermediate_size, cfg.mlp_bias and cfg.arch == "llama"
        self.gate_proj = Linear(h, i, bias=b)
        self.up_proj = Linear(h, i, bias=b)
        self.down_proj = Linear(i, h, bias=b)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.input_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.self_attn = Attention(cfg)
        self.post_attention_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.mlp = MLP(cfg)

    def forward(self, x, cos, sin):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin)
        return x + self.mlp(self.post_attention_layernorm(x))


class Transformer(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.layers = nn.ModuleList(DecoderLayer(cfg) for _ in range(cfg.num_hidden_layers))
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        if not cfg.tie_word_embeddings:
            self.lm_head = nn.Linear(cfg.hidden_size, cfg.vocab_size, bias=False)
        inv, attn = rope_mod.rope_parameters(cfg.rope_theta, cfg.head_dim, cfg.rope_scaling,
                                             cfg.max_position_embeddings)
        self.inv_freq, self.attention_factor = inv, attn  # float64, not parameters

    def set_act_quant(self, on):
        """Emulate the engine's int8 activation path (used with --weights q8/q4) in every
        linear layer and the output head; the weights themselves are left as they are."""
        self.act_quant = on
        for mod in self.modules():
            if isinstance(mod, Linear):
                mod.quantize_input = on
        return self

    def output_weight(self):
        return self.embed_tokens.weight if self.cfg.tie_word_embeddings else self.lm_head.weight

    def forward(self, input_ids, return_hidden=False):
        """input_ids LongTensor [B, T] -> logits [B, T, V] (and per-layer outputs if asked)."""
        if input_ids.dim() == 1:
            input_ids = input_ids[None]
        T = input_ids.shape[1]
        dtype = self.embed_tokens.weight.dtype
        cos, sin = rope_mod.cos_sin(self.inv_freq, self.attention_factor, T, dtype)
        x = self.embed_tokens(input_ids)
        hidden = []
        for layer in self.layers:
            x = layer(x, cos, sin)
            hidden.append(x)
        h = self.norm(x)
        logits = F.linear(quantize_activations(h) if getattr(self, "act_quant", False) else h,
                          self.output_weight())
        return (logits, hidden) if return_hidden else logits

    @torch.no_grad()
    def greedy(self, ids, n):
        """n greedy tokens after the prompt ids (argmax; ties go to the lowest id, which is
        what torch.argmax returns). Full recompute each step: fine for tiny models."""
        seq = [int(i) for i in (ids.tolist() if torch.is_tensor(ids) else ids)]
        out = []
        for _ in range(n):
            logits = self.forward(torch.tensor([seq]))[0, -1]
            nxt = int(torch.argmax(logits))
            out.append(nxt)
            seq.append(nxt)
        return out

    def hf_state_dict(self, prefix="model."):
        """State dict under HF checkpoint names for the given decoder prefix."""
        head = PREFIXES.get(prefix, "lm_head.weight")
        out = {}
        for k, v in self.state_dict().items():
            out[head if k == "lm_head.weight" else prefix + k] = v
        return out

    def load_hf_state_dict(self, sd):
        """Load HF-named tensors with any known prefix; extra tensors (vision towers etc.) are
        ignored, missing ones raise. Values are converted to this module's dtype."""
        own = self.state_dict()
        for prefix, head in PREFIXES.items():
            if prefix + "embed_tokens.weight" in sd:
                break
        else:
            raise KeyError("no embed_tokens.weight under any known prefix")
        new = {}
        for k, v in own.items():
            name = head if k == "lm_head.weight" else prefix + k
            if name not in sd:
                raise KeyError(f"missing tensor {name}")
            if tuple(sd[name].shape) != tuple(v.shape):
                raise ValueError(f"{name}: shape {list(sd[name].shape)} != {list(v.shape)}")
            new[k] = sd[name].to(v.dtype)
        self.load_state_dict(new)
        return prefix


def load_hf_folder(model_dir, dtype=torch.float32):
    """Read config.json + (sharded) safetensors -> (ModelConfig, Transformer in `dtype`).
    Stored bf16/f16 values are upcast exactly, so the reference sees the same numbers."""
    with open(os.path.join(model_dir, "config.json")) as f:
        cfg = ModelConfig.from_hf(json.load(f))
    model = Transformer(cfg).to(dtype)
    model.load_hf_state_dict(read_model_tensors(model_dir))
    model.eval()
    return cfg, model
