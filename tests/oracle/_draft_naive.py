"""A second, deliberately naive implementation of one DFlash draft block (numpy float64, one
head at a time, written from the prose of shared/dflash-format.md), used to check the PyTorch
reference in tools/reference/dflash_draft.py before the engine is compared against it."""
import numpy as np


def rms(x, w, eps):
    return w * (x / np.sqrt((x * x).mean(-1, keepdims=True) + eps))


def rope(x, pos, theta):
    """NeoX rotate-half RoPE of rows x [n, d] at integer positions pos [n]."""
    d = x.shape[-1]
    inv = theta ** (-np.arange(0, d, 2, dtype=np.float64) / d)
    ang = np.outer(pos, inv)
    c, s = np.cos(ang), np.sin(ang)
    a, b = x[:, :d // 2], x[:, d // 2:]
    return np.concatenate([a * c - b * s, b * c + a * s], -1)


def silu(x):
    return x / (1 + np.exp(-x))


def block_logits(sd, cfg, taps, first, embed, lm_head, B):
    """sd: {tensor name: float64 array}; cfg: DraftConfig; taps: [S, k*H] target features;
    embed/lm_head: the target's matrices. Returns [B-1, V] for block rows 1..B-1."""
    g = lambda n: sd[n]
    eps, d = cfg.rms_norm_eps, cfg.head_dim
    nh, nkv = cfg.num_attention_heads, cfg.num_key_value_heads
    S = taps.shape[0]
    ctx = rms(taps @ g("fc.weight").T, g("hidden_norm.weight"), eps)
    x = embed[[first] + [cfg.mask_token_id] * (B - 1)].copy()
    pos_c, pos_b = np.arange(S), S + np.arange(B)
    for i in range(cfg.num_hidden_layers):
        p = f"layers.{i}."
        h = rms(x, g(p + "input_layernorm.weight"), eps)
        wq, wk = g(p + "self_attn.q_proj.weight"), g(p + "self_attn.k_proj.weight")
        wv, wo = g(p + "self_attn.v_proj.weight"), g(p + "self_attn.o_proj.weight")
        qn, kn = g(p + "self_attn.q_norm.weight"), g(p + "self_attn.k_norm.weight")
        heads = []
        for j in range(nh):
            kvh = j // (nh // nkv)
            q = rope(rms(h @ wq[j * d:(j + 1) * d].T, qn, eps), pos_b, cfg.rope_theta)
            wkh, wvh = wk[kvh * d:(kvh + 1) * d], wv[kvh * d:(kvh + 1) * d]
            k = np.concatenate([rope(rms(ctx @ wkh.T, kn, eps), pos_c, cfg.rope_theta),
                                rope(rms(h @ wkh.T, kn, eps), pos_b, cfg.rope_theta)])
            v = np.concatenate([ctx @ wvh.T, h @ wvh.T])
            sc = q @ k.T / np.sqrt(d)  # every block row sees every context and block row
            sc = np.exp(sc - sc.max(-1, keepdims=True))
            heads.append((sc / sc.sum(-1, keepdims=True)) @ v)
        x = x + np.concatenate(heads, -1) @ wo.T
        h2 = rms(x, g(p + "post_attention_layernorm.weight"), eps)
        mlp = silu(h2 @ g(p + "mlp.gate_proj.weight").T) * (h2 @ g(p + "mlp.up_proj.weight").T)
        x = x + mlp @ g(p + "mlp.down_proj.weight").T
    return rms(x, g("norm.weight"), eps)[1:] @ lm_head.T
