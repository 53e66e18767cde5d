#!/usr/bin/python3
"""Standalone checks of the Qwen3.5 hybrid reference (tools/reference/qwen35.py) and of the
random-checkpoint writer (tools/make_qwen35.py); no engine needed:
  /usr/bin/python3 tools/reference/qwen35_selfcheck.py
On 4 small random shapes (nk != nv and nk == nv, tied and untied, both checkpoint forms,
>= 2 full-attention layers each), written into a temporary folder:
 (a) logits and hidden states of a 24-token sequence all at once == one position at a time
     with carried states (norm-wise relative error: float64 <= 1e-12, float32 <= 5e-6; not
     bitwise, see check_stepwise), a split prefill, and a re-run from a mid-sequence snapshot;
 (b) the multimodal and causal-lm forms of the same weights give identical logits;
 (c) the Gated DeltaNet layer and recurrence match independent formulations written here
     (F.conv1d, and the chunked unit-lower-triangular "matrix" form / the transition-matrix
     product) within 1e-5;
 (d) zero-centered norms: weight 0 behaves as weight 1, and folding (1 + w) into the next
     projection reproduces the logits (the +1 is applied exactly once).
Exit status 0 when everything passes."""
import math
import os
import sys
import tempfile
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from make_qwen35 import make_qwen35  # noqa: E402
from reference import qwen35  # noqa: E402
from reference.qwen35 import load_hf_folder  # noqa: E402
from reference.safetensors_io import read_model_tensors, write_model_tensors  # noqa: E402

results = []
T_SEQ = 24


def check(name, ok, detail=""):
    results.append(bool(ok))
    print(f"{'PASS' if ok else 'FAIL'} {name} {detail}")


def rel(a, b):
    """max |a - b| / max |b| (elementwise worst case, relative to the tensor's scale)."""
    return ((a - b).abs().max() / b.abs().max().clamp_min(1e-300)).item()


def nrel(a, b):
    """||a - b|| / ||b|| (norm-wise relative error, the usual "relative" of numerics)."""
    return ((a - b).norm() / b.norm().clamp_min(1e-300)).item()


# Four shapes; all have at least two full-attention layers.
SHAPES = {
    "A": dict(form="multimodal", tie=False, hidden=64, layers=8, full_every=4,
              linear_key_heads=2, linear_value_heads=6, linear_key_dim=16, linear_value_dim=16,
              heads=4, kv_heads=2, head_dim=32, vocab=384, dtype="bf16", mtp=True,
              visual_stub=True, seed=1),
    "B": dict(form="causal-lm", tie=True, hidden=48, layers=4, full_every=2,
              linear_key_heads=4, linear_value_heads=4, linear_key_dim=8, linear_value_dim=8,
              heads=4, kv_heads=1, head_dim=32, vocab=384, dtype="f32", seed=2),
    "C": dict(form="causal-lm", tie=False, hidden=64, layers=6, layer_types="L,F,L,L,F,L",
              linear_key_heads=2, linear_value_heads=4, linear_key_dim=16, linear_value_dim=24,
              heads=6, kv_heads=2, head_dim=32, vocab=300, dtype="bf16", alt_small_dtypes=True,
              mtp=True, seed=3),
    "D": dict(form="multimodal", tie=True, hidden=64, layers=4, full_every=2,
              linear_key_heads=2, linear_value_heads=2, linear_key_dim=16, linear_value_dim=16,
              heads=2, kv_heads=2, head_dim=64, partial_rotary=0.5, vocab=512, dtype="bf16",
              seed=4),
}


def sequence(vocab, seed):
    return torch.randint(0, vocab, (T_SEQ,), generator=torch.Generator().manual_seed(seed))


# ---------------------------------------------------------------------------------------
# Independent Gated DeltaNet formulations (written from fmt §3.4, not from qwen35.py)

def softplus_torch_rule(x):
    # ln(1 + e^x), returning x for x > 20 as PyTorch does (fmt §3.4 step 4)
    return torch.where(x > 20, x, torch.log1p(torch.exp(x.clamp(max=20))))


def chunk_matrix_form(q, k, v, alpha, beta, S0):
    """One chunk of the gated delta rule for one head, closed form. q, k [T, dk], v [T, dv],
    alpha, beta [T], S0 [dk, dv]. With G_t = sum_{u<=t} log alpha_u, gamma_t = exp(G_t) and
    S_t = alpha_t S_{t-1} + k_t delta_t^T:
      delta_t = beta_t (v_t - gamma_t S0^T k_t - sum_{s<t} e^{G_t-G_s} (k_t.k_s) delta_s)
      => (I + diag(beta) A) Delta = diag(beta) (V - diag(gamma) K S0), A strictly lower;
      o_t = gamma_t S0^T q_t + sum_{s<=t} e^{G_t-G_s} (q_t.k_s) delta_s;
      S_T = gamma_T S0 + sum_s e^{G_T-G_s} k_s delta_s^T."""
    T = q.shape[0]
    G = torch.cumsum(torch.log(alpha), 0)
    D = torch.exp(G[:, None] - G[None, :])
    strict = torch.ones(T, T, dtype=torch.bool).tril(-1)
    incl = torch.ones(T, T, dtype=torch.bool).tril()
    A = torch.where(strict, D * (k @ k.T), torch.zeros_like(D))
    lhs = torch.eye(T, dtype=q.dtype) + beta[:, None] * A
    rhs = beta[:, None] * (v - torch.exp(G)[:, None] * (k @ S0))
    Delta = torch.linalg.solve_triangular(lhs, rhs, upper=False)
    O = torch.exp(G)[:, None] * (q @ S0) + torch.where(incl, D * (q @ k.T), torch.zeros_like(D)) @ Delta
    S = torch.exp(G[-1]) * S0 + (torch.exp(G[-1] - G)[:, None] * k).T @ Delta
    return O, S


def chunked_gdn(q, k, v, alpha, beta, S0, chunk):
    """All value heads, sequence cut into chunks of `chunk` rows. q, k [T, nv, dk]."""
    T, nv = q.shape[:2]
    outs, S = [], S0.clone()
    for s in range(0, T, chunk):
        e = min(T, s + chunk)
        o_heads, S_heads = [], []
        for j in range(nv):
            o, Sj = chunk_matrix_form(q[s:e, j], k[s:e, j], v[s:e, j], alpha[s:e, j],
                                      beta[s:e, j], S[j])
            o_heads.append(o)
            S_heads.append(Sj)
        outs.append(torch.stack(o_heads, 1))
        S = torch.stack(S_heads)
    return torch.cat(outs), S


def transition_product(q, k, v, alpha, beta, S0):
    """S_t = alpha_t (I - beta_t k_t k_t^T) S_{t-1} + beta_t k_t v_t^T, o_t = S_t^T q_t,
    with explicit dk x dk matrices."""
    T, nv, dk = q.shape
    S, outs = S0.clone(), []
    I = torch.eye(dk, dtype=q.dtype)
    for t in range(T):
        rows = []
        for j in range(nv):
            kk = k[t, j][:, None]
            S[j] = alpha[t, j] * (I - beta[t, j] * kk @ kk.T) @ S[j] + beta[t, j] * kk @ v[t, j][None]
            rows.append(S[j].T @ q[t, j])
        outs.append(torch.stack(rows))
    return torch.stack(outs), S


def gdn_layer_inline(lin, u, split):
    """Gated DeltaNet mixer output for rows u [T, H] from a fresh state, written from
    fmt §3.4 with other primitives than qwen35.py: the conv via F.conv1d (K-1 left padding,
    first T outputs), head mapping by index j // r, sqrt/division l2 norm, and the chunked
    matrix form with a chunk boundary at `split` (so the carried state is exercised)."""
    nk, nv, dk, dv, K = lin.nk, lin.nv, lin.dk, lin.dv, lin.K
    T = u.shape[0]
    m = u @ lin.in_proj_qkv.weight.T
    z = (u @ lin.in_proj_z.weight.T).view(T, nv, dv)
    b = u @ lin.in_proj_b.weight.T
    a = u @ lin.in_proj_a.weight.T
    C = m.shape[1]
    c = F.conv1d(m.T[None], lin.conv1d.weight, padding=K - 1, groups=C)[0, :, :T].T
    c = c / (1 + torch.exp(-c))
    q = c[:, :nk * dk].reshape(T, nk, dk)
    k = c[:, nk * dk:2 * nk * dk].reshape(T, nk, dk)
    v = c[:, 2 * nk * dk:].reshape(T, nv, dv)
    idx = torch.arange(nv) // (nv // nk)
    q, k = q[:, idx], k[:, idx]
    q = q / torch.sqrt((q * q).sum(-1, keepdim=True) + 1e-6) / math.sqrt(dk)
    k = k / torch.sqrt((k * k).sum(-1, keepdim=True) + 1e-6)
    beta = 1 / (1 + torch.exp(-b))
    alpha = torch.exp(-torch.exp(lin.A_log) * softplus_torch_rule(a + lin.dt_bias))
    o, _ = chunked_gdn(q, k, v, alpha, beta, torch.zeros(nv, dk, dv, dtype=u.dtype), split)
    n = o / torch.sqrt((o * o).mean(-1, keepdim=True) + lin.norm.eps)
    y = (lin.norm.weight * n * z / (1 + torch.exp(-z))).reshape(T, nv * dv)
    return y @ lin.out_proj.weight.T


# ---------------------------------------------------------------------------------------

def check_wellconditioned(tag, cfg, model, copied):
    ids = sequence(cfg.vocab_size, 100)
    lg = model(ids)
    gen = model.greedy(ids[:8].tolist(), 16)
    check(f"{tag} logits finite, greedy not constant", torch.isfinite(lg).all() and len(set(gen)) >= 3,
          f"(logit std {lg.std().item():.2f}, greedy {gen})")
    check(f"{tag} tokenizer copied iff vocab >= 384", copied == (cfg.vocab_size >= 384),
          f"(vocab {cfg.vocab_size}, copied {copied})")


def check_stepwise(tag, folder, cfg):
    """(a) all at once vs one position at a time, plus split prefill and snapshot rerun.
    Not bitwise: PyTorch picks different kernels for different row counts (BLAS blocking of
    [T, in] x [in, out]; vectorized vs scalar loops of exp/sigmoid/rsqrt on short rows), so
    the two runs differ by rounding. Criterion: norm-wise relative error <= 1e-12 (float64),
    <= 5e-6 (float32) for logits and every layer's hidden state; the elementwise worst case
    (max|diff| / max|ref|) is printed too. Why 5e-6 and not 1e-6 in float32: the tied shapes'
    logits are dot products with small embeddings (std 0.05) and much cancellation; their
    float64 discrepancy is ~3e-15, i.e. the float32 one (~1.2e-6) is the same rounding scaled
    by 2^29, not a state error (a wrong carried state moves logits by >= 1e-3)."""
    ids = sequence(cfg.vocab_size, 7)
    for dtype, tol in ((torch.float64, 1e-12), (torch.float32, 5e-6)):
        _, m = load_hf_folder(folder, dtype)
        full, hid = m.forward(ids, return_hidden=True)
        step, hid_s, snaps = m.forward_stepwise(ids)
        pairs = [(step, full)] + list(zip(hid_s, hid))
        e = max(nrel(a, b) for a, b in pairs)
        em = max(rel(a, b) for a, b in pairs)
        name = "f64" if dtype == torch.float64 else "f32"
        check(f"{tag} (a) {name} all-at-once == one-at-a-time (logits+hidden)", e <= tol,
              f"(rel {e:.1e}, elementwise {em:.1e}, bitwise {torch.equal(step, full)})")
        st = m.new_state()
        part = torch.cat([m.forward(ids[:10], st), m.forward(ids[10:], st)])
        snap = snaps[9].clone()  # state after rows 0..9
        rerun = m.forward(ids[10:], snap)
        e2, e3 = nrel(part, full), nrel(rerun, full[10:])
        check(f"{tag} (a) {name} split prefill 10+14 and rerun from snapshot[9]",
              e2 <= tol and e3 <= tol and snaps[9].pos == 10, f"(rel {e2:.1e}, {e3:.1e})")


def check_forms(tag, folder, other_folder, cfg):
    """(b) the same weights in the other checkpoint form give identical logits."""
    ids = sequence(cfg.vocab_size, 8)
    for dtype in (torch.float64, torch.float32):
        c1, m1 = load_hf_folder(folder, dtype)
        c2, m2 = load_hf_folder(other_folder, dtype)
        l1, h1 = m1(ids, return_hidden=True)
        l2, h2 = m2(ids, return_hidden=True)
        same = torch.equal(l1, l2) and all(torch.equal(a, b) for a, b in zip(h1, h2))
        check(f"{tag} (b) {c1.form} == {c2.form} ({str(dtype)[6:]})", same and c1.form != c2.form)


def check_gdn(tag, folder, cfg):
    """(c) every linear layer against the independent inline formulation."""
    _, m = load_hf_folder(folder, torch.float64)
    g = torch.Generator().manual_seed(9)
    worst = 0.0
    for i, layer in enumerate(m.layers):
        if layer.kind != "linear_attention":
            continue
        u = torch.randn(T_SEQ, cfg.hidden_size, generator=g, dtype=torch.float64)
        st = m.new_state().layers[i]
        ref = torch.cat([layer.linear_attn(u[:10], st), layer.linear_attn(u[10:], st)])
        with torch.no_grad():
            want = gdn_layer_inline(layer.linear_attn, u, split=10)
        worst = max(worst, rel(ref, want))
    check(f"{tag} (c) Gated DeltaNet layers == conv1d + chunked matrix form", worst <= 1e-5,
          f"(max rel {worst:.1e})")


def check_recurrence_core():
    """(c) qwen35.gated_delta_recurrence on random inputs with a nonzero initial state."""
    g = torch.Generator().manual_seed(5)
    T, nv, dk, dv = 12, 3, 5, 4
    q = torch.randn(T, nv, dk, generator=g, dtype=torch.float64)
    k = F.normalize(torch.randn(T, nv, dk, generator=g, dtype=torch.float64), dim=-1)
    v = torch.randn(T, nv, dv, generator=g, dtype=torch.float64)
    alpha = 0.1 + 0.9 * torch.rand(T, nv, generator=g, dtype=torch.float64)
    beta = torch.rand(T, nv, generator=g, dtype=torch.float64)
    S0 = torch.randn(nv, dk, dv, generator=g, dtype=torch.float64)
    o, S = qwen35.gated_delta_recurrence(q, k, v, alpha, beta, S0)
    for name, (o2, S2) in (("transition-matrix product", transition_product(q, k, v, alpha, beta, S0)),
                           ("one-chunk matrix form", chunked_gdn(q, k, v, alpha, beta, S0, T)),
                           ("chunks of 5", chunked_gdn(q, k, v, alpha, beta, S0, 5))):
        e = max(rel(o, o2), rel(S, S2))
        check(f"(c) recurrence == {name} (outputs and final state)", e <= 1e-5, f"(max rel {e:.1e})")
    o32, S32 = qwen35.gated_delta_recurrence(q, k, v, alpha, beta, S0.float())
    check("(c) fp32 state: dtype kept, close to f64", S32.dtype == torch.float32 and
          rel(o32.double(), o) < 1e-5, f"(rel {rel(o32.double(), o):.1e})")


def check_zero_norms(tmp):
    """(d) weight 0 -> effective weight 1, applied exactly once."""
    folder = os.path.join(tmp, "zero")
    make_qwen35(folder, **{**SHAPES["A"], "zero_norms": True, "mtp": False, "visual_stub": False})
    _, m = load_hf_folder(folder, torch.float64)
    x = torch.randn(5, 64, dtype=torch.float64) * 3
    ok, n_norms = True, 0
    for name, mod in m.named_modules():
        if isinstance(mod, qwen35.ZeroCenteredRMSNorm):
            n_norms += 1
            xx = x[:, :mod.weight.shape[0]]
            plain = xx / torch.sqrt(xx.pow(2).mean(-1, keepdim=True) + mod.eps)
            ok &= torch.count_nonzero(mod.weight).item() == 0
            ok &= rel(mod(xx), plain) <= 1e-15
    check("(d) zero-centered norms with stored weight 0 compute x/rms(x) (weight 1)", ok,
          f"({n_norms} norms)")
    # The gated norm keeps its plain weight (no +1).
    lin = m.layers[0].linear_attn
    o, z = torch.randn(3, 16, dtype=torch.float64), torch.randn(3, 16, dtype=torch.float64)
    want = lin.norm.weight * o / torch.sqrt((o * o).mean(-1, keepdim=True) + 1e-6) * F.silu(z)
    check("(d) linear_attn.norm is plain w (no +1)", rel(lin.norm(o, z), want) <= 1e-15)

    # Folding: zero-centered weight w before a projection P equals weight 0 before P diag(1+w).
    src = os.path.join(tmp, "A-multimodal")
    _, m0 = load_hf_folder(src, torch.float64)
    sd = read_model_tensors(src)
    pre = "model.language_model."
    folded = {k: v.double() for k, v in sd.items() if not k.startswith(("mtp.", "model.visual."))}
    consumers = {
        "input_layernorm": ["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
                            "linear_attn.in_proj_qkv", "linear_attn.in_proj_z",
                            "linear_attn.in_proj_b", "linear_attn.in_proj_a"],
        "post_attention_layernorm": ["mlp.gate_proj", "mlp.up_proj"],
    }
    for i in range(m0.cfg.num_hidden_layers):
        for norm, projs in consumers.items():
            nk = f"{pre}layers.{i}.{norm}.weight"
            scale = 1.0 + folded[nk]
            folded[nk] = torch.zeros_like(folded[nk])
            for p in projs:
                pk = f"{pre}layers.{i}.{p}.weight"
                if pk in folded:
                    folded[pk] = folded[pk] * scale[None, :]
    scale = 1.0 + folded[pre + "norm.weight"]
    folded[pre + "norm.weight"] = torch.zeros_like(scale)
    folded["lm_head.weight"] = folded["lm_head.weight"] * scale[None, :]
    fdir = os.path.join(tmp, "folded")
    write_model_tensors(fdir, folded)
    with open(os.path.join(src, "config.json")) as f_in, \
            open(os.path.join(fdir, "config.json"), "w") as f_out:
        f_out.write(f_in.read())
    _, m1 = load_hf_folder(fdir, torch.float64)
    ids = sequence(m0.cfg.vocab_size, 11)
    l0, l1 = m0(ids), m1(ids)
    # Sensitivity: the same folded checkpoint with its norm weights set back to the original
    # w would mean "(1+w) applied twice"; it must move the logits clearly.
    for k in list(folded):
        if k.endswith(("input_layernorm.weight", "post_attention_layernorm.weight")) or \
                k == pre + "norm.weight":
            folded[k] = sd[k].double()
    write_model_tensors(fdir, folded)
    _, m2 = load_hf_folder(fdir, torch.float64)
    l2 = m2(ids)
    check("(d) folding (1+w) into the next projection reproduces the logits "
          "(+1 applied exactly once)", rel(l1, l0) <= 1e-10 and rel(l2, l0) > 1e-3,
          f"(folded rel {rel(l1, l0):.1e}; (1+w) twice rel {rel(l2, l0):.1e})")


def check_loader_guards(tmp):
    src = os.path.join(tmp, "A-multimodal")
    sd = read_model_tensors(src)
    cfg, m = load_hf_folder(src, torch.float64)
    check("mtp.* and model.visual.* present and skipped",
          any(k.startswith("mtp.") for k in sd) and any(k.startswith("model.visual.") for k in sd))
    bad = dict(sd)
    bad["model.language_model.layers.0.extra.weight"] = torch.zeros(1)
    try:
        qwen35.Qwen35Model(cfg).double().load_hf_state_dict(bad)
        ok = False
    except KeyError:
        ok = True
    mlx = {("language_model.model." + k[len("model.language_model."):]
            if k.startswith("model.language_model.") else k): v for k, v in sd.items()}
    try:
        qwen35.Qwen35Model(cfg).double().load_hf_state_dict(mlx)
        ok = False
    except ValueError:
        pass
    check("loader rejects unknown tensors and MLX-prefixed (already +1) checkpoints", ok)


def check_config_parsing(tmp):
    """fmt §1.1/§1.2: layer_types from full_attention_interval when absent; old-style
    top-level rope_theta / partial_rotary_factor; the multimodal form's top-level tie flag."""
    import json
    with open(os.path.join(tmp, "A-multimodal", "config.json")) as f:
        d = json.load(f)
    text = dict(d["text_config"])
    del text["layer_types"]
    rp = text.pop("rope_parameters")
    text.update(rope_theta=12345.0, partial_rotary_factor=0.5, full_attention_interval=3)
    cfg = qwen35.Qwen35Config.from_hf({"architectures": ["Qwen3_5ForCausalLM"], **text})
    ok = cfg.layer_types == ["full_attention" if (i + 1) % 3 == 0 else "linear_attention"
                             for i in range(8)]
    ok &= cfg.rope_theta == 12345.0 and cfg.rotary_dim == 16 and cfg.form == "causal-lm"
    cfg2 = qwen35.Qwen35Config.from_hf(d)
    ok &= cfg2.form == "multimodal" and cfg2.rope_theta == rp["rope_theta"] and cfg2.rotary_dim == 8
    d3 = {**d, "tie_word_embeddings": True}
    ok &= qwen35.Qwen35Config.from_hf(d3).tie_word_embeddings and not cfg2.tie_word_embeddings
    check("config: interval fallback, top-level rope keys, multimodal top-level tie flag", ok)


def main():
    t0 = time.time()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as tmp:
        for tag, shape in SHAPES.items():
            other = "causal-lm" if shape["form"] == "multimodal" else "multimodal"
            folder = os.path.join(tmp, f"{tag}-{shape['form']}")
            other_folder = os.path.join(tmp, f"{tag}-{other}")
            cfg, _, copied = make_qwen35(folder, **shape)
            make_qwen35(other_folder, **{**shape, "form": other, "visual_stub": False})
            nfull = cfg.layer_types.count("full_attention")
            print(f"-- shape {tag}: {cfg.form}, {'tied' if cfg.tie_word_embeddings else 'untied'}, "
                  f"H={cfg.hidden_size}, L={cfg.num_hidden_layers} ({nfull} full), "
                  f"nk={cfg.linear_num_key_heads} nv={cfg.linear_num_value_heads} "
                  f"dk={cfg.linear_key_head_dim} dv={cfg.linear_value_head_dim}, "
                  f"heads {cfg.num_attention_heads}/{cfg.num_key_value_heads} hd={cfg.head_dim} "
                  f"R={cfg.rotary_dim}, V={cfg.vocab_size}, {shape['dtype']}")
            assert nfull >= 2
            _, m = load_hf_folder(folder, torch.float64)
            check_wellconditioned(tag, cfg, m, copied)
            check_stepwise(tag, folder, cfg)
            check_forms(tag, folder, other_folder, cfg)
            check_gdn(tag, folder, cfg)
        print("-- recurrence, norms, loader")
        check_recurrence_core()
        check_zero_norms(tmp)
        check_loader_guards(tmp)
        check_config_parsing(tmp)
    n_fail = results.count(False)
    print(f"{results.count(True)} passed, {n_fail} failed ({time.time() - t0:.1f} s)")
    return 1 if n_fail else 0


if __name__ == "__main__":
    sys.exit(main())
