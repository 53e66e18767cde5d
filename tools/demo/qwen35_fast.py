"""Batched, differentiable forward of tools/reference/qwen35.Qwen35Model (the same parameters,
the same math) for training and for batched greedy decoding.

The reference runs the Gated DeltaNet recurrence one position at a time on one sequence; here
rows are batched [N, T] and the recurrence runs in the chunked form (fmt §3.4 "Chunked form"),
which is mathematically equal and agrees up to floating-point rounding. With the within-chunk
cumulative decay G_t = sum_{s<=t} g_s (gamma_t = exp(G_t)) and the state S_0 before the chunk:
    (I + A) D = diag(beta) V - diag(beta gamma) K S_0,  A[t,j] = beta_t exp(G_t-G_j) k_t.k_j  (j<t)
    o_t   = gamma_t S_0^T q_t + sum_{j<=t} exp(G_t-G_j) (q_t.k_j) d_j
    S_end = gamma_C S_0 + sum_j exp(G_C-G_j) k_j d_j^T
(d_t is the delta-rule correction beta_t (v_t - alpha_t S_{t-1}^T k_t) of the reference).

forward(model, ids, state=None, valid=None, return_hidden=False)
  ids [N, T]; `state` (from new_state) is continued and updated in place; `valid` [N, T] bool
  marks real rows (False = left padding: the pad rows leave conv and recurrent state at zero and
  are masked as attention keys, so a left-padded row gives what it would give alone).
greedy(model, prompts, n_new, eos_ids)  batched greedy continuations (prefill, then 1 row/step).
"""
import math

import torch
import torch.nn.functional as F

CHUNK = 64


def zc_norm(norm, x):
    """ZeroCenteredRMSNorm in fp32."""
    xf = x.float()
    return xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + norm.eps) * (1.0 + norm.weight)


def rope(x, pos, inv_freq):
    """x [N, h, T, hd], pos [N, T]: NeoX rotate-half inside the first R dims (fmt §3.3)."""
    R = 2 * inv_freq.shape[0]
    ang = pos.float()[:, None, :, None] * inv_freq[None, None, None, :]
    cos, sin = ang.cos(), ang.sin()
    x1, x2, rest = x[..., :R // 2], x[..., R // 2:R], x[..., R:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin, rest], -1)


def chunk_delta_rule(q, k, v, g, beta, S0, chunk=CHUNK):
    """q, k [N, h, T, dk] (normalised, q scaled), v [N, h, T, dv], g (log decay) and beta
    [N, h, T], S0 [N, h, dk, dv]. Returns (o [N, h, T, dv], S after the last row). fp32."""
    N, h, T, dk = k.shape
    pad = (-T) % chunk
    if pad:
        q, k, v = (F.pad(t, (0, 0, 0, pad)) for t in (q, k, v))
        g, beta = F.pad(g, (0, pad)), F.pad(beta, (0, pad))
    n = (T + pad) // chunk
    q, k, v = (t.reshape(N, h, n, chunk, -1) for t in (q, k, v))
    g, beta = g.reshape(N, h, n, chunk), beta.reshape(N, h, n, chunk)
    G = g.cumsum(-1)
    diff = G[..., :, None] - G[..., None, :]                     # G_t - G_j
    low = torch.ones(chunk, chunk, dtype=torch.bool).tril()
    dec = torch.where(low, diff, torch.full_like(diff, -math.inf)).exp()  # j <= t
    kk = k @ k.transpose(-1, -2)
    A = beta[..., None] * kk * dec       # only its strictly lower part is read below
    rhs = torch.cat([beta[..., None] * v, (beta * G.exp())[..., None] * k], -1)
    X = torch.linalg.solve_triangular(A, rhs, upper=False, unitriangular=True)  # (I + A) X = rhs
    U, W = X[..., :v.shape[-1]], X[..., v.shape[-1]:]              # D = U - W S0
    qk = (q @ k.transpose(-1, -2)) * dec
    outs, S = [], S0
    for c in range(n):
        D = U[:, :, c] - W[:, :, c] @ S
        o = (q[:, :, c] * G[:, :, c, :, None].exp()) @ S + qk[:, :, c] @ D
        outs.append(o)
        last = G[:, :, c, -1]
        S = last.exp()[..., None, None] * S + \
            ((last[..., None] - G[:, :, c]).exp()[..., None] * k[:, :, c]).transpose(-1, -2) @ D
    o = torch.stack(outs, 2).reshape(N, h, n * chunk, -1)[:, :, :T]
    return o, S


def new_state(model, N):
    cfg = model.cfg
    st = {"pos": torch.zeros(N, dtype=torch.long), "keys_ok": torch.zeros(N, 0, dtype=torch.bool),
          "layers": []}
    for t in cfg.layer_types:
        if t == "full_attention":
            e = torch.zeros(N, cfg.num_key_value_heads, 0, cfg.head_dim)
            st["layers"].append({"k": e, "v": e.clone()})
        else:
            st["layers"].append({
                "conv": torch.zeros(N, cfg.linear_conv_kernel_dim - 1, cfg.conv_dim),
                "rec": torch.zeros(N, cfg.linear_num_value_heads, cfg.linear_key_head_dim,
                                   cfg.linear_value_head_dim)})
    return st


def gdn(mod, u, st, valid):
    N, T, _ = u.shape
    nk, nv, dk, dv, K = mod.nk, mod.nv, mod.dk, mod.dv, mod.K
    m = mod.in_proj_qkv(u)
    z = mod.in_proj_z(u).view(N, T, nv, dv)
    b, a = mod.in_proj_b(u).float(), mod.in_proj_a(u).float()
    if valid is not None:
        m = m * valid[..., None]
    m0 = st["conv"] if st is not None else torch.zeros(N, K - 1, m.shape[-1])
    xs = torch.cat([m0.to(m.dtype), m], 1)                         # [N, K-1+T, C]
    if st is not None:
        st["conv"] = xs[:, -(K - 1):].float().detach()
    c = F.conv1d(xs.transpose(1, 2), mod.conv1d.weight.to(xs.dtype), groups=xs.shape[-1])
    c = F.silu(c.transpose(1, 2).float())                          # [N, T, C]
    q = c[..., :nk * dk].reshape(N, T, nk, dk)
    k = c[..., nk * dk:2 * nk * dk].reshape(N, T, nk, dk)
    v = c[..., 2 * nk * dk:].reshape(N, T, nv, dv)
    beta = torch.sigmoid(b)
    g = -torch.exp(mod.A_log.float()) * F.softplus(a + mod.dt_bias.float())
    if valid is not None:
        beta, g = beta * valid[..., None], g * valid[..., None]
    r = nv // nk
    q, k = q.repeat_interleave(r, 2), k.repeat_interleave(r, 2)
    q = q * torch.rsqrt(q.pow(2).sum(-1, keepdim=True) + 1e-6) * dk ** -0.5
    k = k * torch.rsqrt(k.pow(2).sum(-1, keepdim=True) + 1e-6)
    S0 = st["rec"] if st is not None else torch.zeros(N, nv, dk, dv)
    tr = lambda x: x.transpose(1, 2)
    if T == 1:  # one decode row: the recurrence itself
        al, be = g[:, 0].exp()[..., None, None], beta[:, 0][..., None]
        S = al * S0
        d = be * (v[:, 0] - torch.einsum("njid,nji->njd", S, k[:, 0]))
        S = S + k[:, 0, :, :, None] * d[:, :, None, :]
        o = torch.einsum("njid,nji->njd", S, q[:, 0])[:, :, None]
    else:
        o, S = chunk_delta_rule(tr(q), tr(k), tr(v), tr(g), tr(beta), S0)
    if st is not None:
        st["rec"] = S.detach()
    o = tr(o)                                                      # [N, T, nv, dv]
    n = o * torch.rsqrt(o.pow(2).mean(-1, keepdim=True) + mod.norm.eps)
    zf = z.float()
    y = (mod.norm.weight * n * (zf * torch.sigmoid(zf))).reshape(N, T, nv * dv)
    return mod.out_proj(y)


def attention(mod, u, st, pos, keys_ok, inv_freq):
    N, T, _ = u.shape
    hd, nh, nkv = mod.hd, mod.nh, mod.nkv
    P = mod.q_proj(u).view(N, T, nh, 2 * hd)
    q, gate = zc_norm(mod.q_norm, P[..., :hd]), P[..., hd:]
    k = zc_norm(mod.k_norm, mod.k_proj(u).view(N, T, nkv, hd))
    v = mod.v_proj(u).view(N, T, nkv, hd).float()
    q, k, v = (t.transpose(1, 2) for t in (q, k, v))
    q, k = rope(q, pos, inv_freq), rope(k, pos, inv_freq)
    if st is not None:
        k = st["k"] = torch.cat([st["k"], k.detach()], 2)
        v = st["v"] = torch.cat([st["v"], v.detach()], 2)
    S = k.shape[2]
    rep = nh // nkv
    qg = q.reshape(N, nkv, rep, T, hd)
    sc = (qg @ k[:, :, None].transpose(-1, -2)) * hd ** -0.5        # [N, nkv, rep, T, S]
    causal = torch.ones(T, S, dtype=torch.bool).tril(S - T)
    own = torch.zeros(T, S, dtype=torch.bool)
    own[:, S - T:] = torch.eye(T, dtype=torch.bool)                  # pad queries see themselves
    mask = causal[None] & (keys_ok[:, None, :] | own[None])
    sc = sc.masked_fill(~mask[:, None, None], -math.inf)
    p = torch.softmax(sc.float(), -1)
    o = (p @ v[:, :, None]).reshape(N, nh, T, hd).transpose(1, 2).reshape(N, T, nh * hd)
    o = o * torch.sigmoid(gate.reshape(N, T, nh * hd).float())
    return mod.o_proj(o)


def mlp(mod, x):
    # SiLU in fp32: under bf16 autocast torch's bf16 silu backward is ~10x slower on CPU
    return mod.down_proj(F.silu(mod.gate_proj(x).float()) * mod.up_proj(x).float())


def forward(model, ids, state=None, valid=None, return_hidden=False):
    """ids [N, T] -> logits [N, T, V] (and the per-layer outputs [N, T, H] with return_hidden)."""
    N, T = ids.shape
    if valid is None:
        valid_b = torch.ones(N, T, dtype=torch.bool)
    else:
        valid_b = valid.bool()
    base = state["pos"] if state is not None else torch.zeros(N, dtype=torch.long)
    pos = (base[:, None] + valid_b.long().cumsum(1) - 1).clamp(min=0)
    keys_ok = valid_b if state is None else torch.cat([state["keys_ok"], valid_b], 1)
    vmask = None if valid is None else valid_b.float()
    x = model.embed_tokens(ids)
    hidden = []
    for i, layer in enumerate(model.layers):
        ls = state["layers"][i] if state is not None else None
        u = zc_norm(layer.input_layernorm, x)
        if layer.kind == "full_attention":
            x = x + attention(layer.self_attn, u, ls, pos, keys_ok, model.inv_freq)
        else:
            x = x + gdn(layer.linear_attn, u, ls, vmask)
        x = x + mlp(layer.mlp, zc_norm(layer.post_attention_layernorm, x))
        hidden.append(x)
    if state is not None:
        state["pos"] = pos[:, -1] + 1
        state["keys_ok"] = keys_ok
    logits = F.linear(zc_norm(model.norm, x), model.output_weight())
    return (logits, hidden) if return_hidden else logits


@torch.no_grad()
def greedy(model, prompts, n_new, eos_ids=()):
    """Batched greedy continuations of id lists (left-padded); cut after the first eos."""
    N, P = len(prompts), max(len(p) for p in prompts)
    ids = torch.tensor([[0] * (P - len(p)) + list(p) for p in prompts])
    valid = torch.tensor([[False] * (P - len(p)) + [True] * len(p) for p in prompts])
    st = new_state(model, N)
    nxt = forward(model, ids, st, valid)[:, -1].argmax(-1)
    out = [nxt]
    ones = torch.ones(N, 1, dtype=torch.bool)
    for _ in range(1, n_new):
        nxt = forward(model, nxt[:, None], st, ones)[:, -1].argmax(-1)
        out.append(nxt)
    res = []
    for g in torch.stack(out, 1).tolist():
        cut = next((i + 1 for i, t in enumerate(g) if t in eos_ids), len(g))
        res.append(g[:cut])
    return res
