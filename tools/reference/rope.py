"""RoPE inverse frequencies and attention scaling, following the published formulas of Hugging
Face transformers' modeling_rope_utils (default, linear, llama3, yarn). Independent code."""
import math

import torch


def default_inv_freq(theta, dim):
    # inv_freq[i] = 1 / theta^(2i/dim), i = 0 .. dim/2-1
    exps = torch.arange(0, dim, 2, dtype=torch.int64).to(torch.float64) / dim
    return 1.0 / (theta ** exps)


def llama3_inv_freq(theta, dim, rs):
    inv = default_inv_freq(theta, dim)
    factor = float(rs["factor"])
    low_ff = float(rs["low_freq_factor"])
    high_ff = float(rs["high_freq_factor"])
    old_ctx = float(rs["original_max_position_embeddings"])
    low_wl, high_wl = old_ctx / low_ff, old_ctx / high_ff
    wavelen = 2 * math.pi / inv
    # Long wavelengths (low frequency) are divided by factor, short ones kept, the band between
    # is blended linearly in old_ctx / wavelen.
    scaled = torch.where(wavelen > low_wl, inv / factor, inv)
    smooth = (old_ctx / wavelen - low_ff) / (high_ff - low_ff)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = (wavelen >= high_wl) & (wavelen <= low_wl)
    return torch.where(medium, smoothed, scaled), 1.0


def _yarn_mscale(scale, m=1.0):
    return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0


def yarn_inv_freq(theta, dim, rs, max_pos):
    factor = float(rs["factor"])
    orig = rs.get("original_max_position_embeddings") or max_pos
    attn = rs.get("attention_factor")
    mscale, mscale_all = rs.get("mscale"), rs.get("mscale_all_dim")
    if attn is None:
        if mscale and mscale_all:
            attn = _yarn_mscale(factor, mscale) / _yarn_mscale(factor, mscale_all)
        else:
            attn = _yarn_mscale(factor)
    beta_fast = rs.get("beta_fast") or 32
    beta_slow = rs.get("beta_slow") or 1

    def corr_dim(n_rot):
        # dimension index whose wavelength makes n_rot full turns over the original context
        return (dim * math.log(orig / (n_rot * 2 * math.pi))) / (2 * math.log(theta))

    low, high = corr_dim(beta_fast), corr_dim(beta_slow)
    if rs.get("truncate", True):
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001  # avoid a zero-width ramp
    ramp = ((torch.arange(dim // 2, dtype=torch.float64) - low) / (high - low)).clamp(0, 1)
    extrap_weight = 1 - ramp  # 1 -> keep original frequency (high freq), 0 -> interpolate
    pos_freqs = theta ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim)
    inv_extra, inv_inter = 1.0 / pos_freqs, 1.0 / (factor * pos_freqs)
    inv = inv_inter * (1 - extrap_weight) + inv_extra * extrap_weight
    return inv, float(attn)


def rope_parameters(theta, dim, rope_scaling, max_pos):
    """Return (inv_freq float64 [dim/2], attention_factor) for a config's rope settings."""
    rs = rope_scaling or {}
    kind = rs.get("rope_type", rs.get("type", "default"))
    if kind == "default":
        return default_inv_freq(theta, dim), 1.0
    if kind == "linear":
        return default_inv_freq(theta, dim) / float(rs["factor"]), 1.0
    if kind == "llama3":
        return llama3_inv_freq(theta, dim, rs)
    if kind == "yarn":
        return yarn_inv_freq(theta, dim, rs, max_pos)
    raise ValueError(f"unsupported rope_scaling type {kind!r}")


def cos_sin(inv_freq, attn_factor, n_pos, dtype=torch.float32):
    """cos/sin tables [n_pos, dim] in NeoX layout (the half-dim frequencies repeated twice),
    multiplied by the attention factor as HF does."""
    pos = torch.arange(n_pos, dtype=torch.float64)
    freqs = torch.outer(pos, inv_freq)
    emb = torch.cat([freqs, freqs], dim=-1)
    return (emb.cos() * attn_factor).to(dtype), (emb.sin() * attn_factor).to(dtype)


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat([-x[..., h:], x[..., :h]], dim=-1)


def apply_rope(x, cos, sin):
    """x [..., T, D]; cos/sin [T, D]."""
    return x * cos + rotate_half(x) * sin
