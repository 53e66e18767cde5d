#!/usr/bin/python3
"""Standalone checks of the reference itself (no engine needed):
  /usr/bin/python3 tools/reference/selfcheck.py
RoPE vs complex multiplication, causal masking vs prefixes, GQA vs expanded MHA, Qwen2 with
zero biases == Llama, Qwen3 q/k-norm placement, llama3/yarn frequency properties, safetensors
round trips (f32/bf16/f16, sharded, all prefixes, tied/untied) and tokenizer invariants."""
import copy
import math
import os
import sys
import tempfile

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from make_model import make_model  # noqa: E402
from reference import bpe_tokenizer, rope  # noqa: E402
from reference.safetensors_io import read_safetensors, write_safetensors  # noqa: E402
from reference.transformer import ModelConfig, Transformer, load_hf_folder  # noqa: E402

results = []


def check(name, ok, detail=""):
    results.append(ok)
    print(f"{'PASS' if ok else 'FAIL'} {name} {detail}")


def cfg_of(arch, **kw):
    base = dict(arch=arch, vocab_size=300, hidden_size=64, intermediate_size=96,
                num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=16)
    base.update(kw)
    return ModelConfig(**base)


def rope_vs_complex():
    # NeoX layout pairs dim i with i + d/2: as a complex number x_i + j x_{i+d/2} rotated by
    # angle pos * inv_freq_i (times the attention factor).
    d, T = 32, 17
    inv, _ = rope.rope_parameters(10000.0, d, None, 4096)
    x = torch.randn(T, d, dtype=torch.float64)
    cos, sin = rope.cos_sin(inv, 1.0, T, torch.float64)
    got = rope.apply_rope(x, cos, sin)
    z = torch.complex(x[:, :d // 2], x[:, d // 2:])
    ang = torch.arange(T, dtype=torch.float64)[:, None] * inv[None]
    w = z * torch.polar(torch.ones_like(ang), ang)
    want = torch.cat([w.real, w.imag], -1)
    check("rope == complex rotation", torch.allclose(got, want, atol=1e-12))
    check("rope inv_freq[1] = theta^(-2/d)", abs(inv[1].item() - 10000 ** (-2 / d)) < 1e-15)


def rope_scaling_props():
    d = 128
    base = rope.default_inv_freq(500000.0, d)
    rs = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
          "original_max_position_embeddings": 8192}
    inv, att = rope.rope_parameters(500000.0, d, rs, 131072)
    wl = 2 * math.pi / base
    hi, lo = wl < 8192 / 4, wl > 8192 / 1
    check("llama3 keeps high freqs", torch.equal(inv[hi], base[hi]) and att == 1.0)
    check("llama3 divides low freqs by factor", torch.allclose(inv[lo], base[lo] / 8))
    mid = ~hi & ~lo
    ratio = base[mid] / inv[mid]
    check("llama3 blends the band monotonically",
          bool(((ratio > 1) & (ratio < 8)).all() and (ratio[1:] >= ratio[:-1]).all()))
    ys = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096}
    inv, att = rope.rope_parameters(1e6, d, ys, 16384)
    b = rope.default_inv_freq(1e6, d)
    check("yarn attention_factor = 0.1 ln(4) + 1", abs(att - (0.1 * math.log(4) + 1)) < 1e-12)
    check("yarn keeps the fastest freq, interpolates the slowest",
          abs(inv[0] - b[0]) < 1e-15 and abs(inv[-1] - b[-1] / 4) < 1e-18)
    ys2 = dict(ys, attention_factor=1.25)
    check("yarn explicit attention_factor", rope.rope_parameters(1e6, d, ys2, 16384)[1] == 1.25)
    ys3 = dict(ys, mscale=1.0, mscale_all_dim=0.5)
    want = (0.1 * math.log(4) + 1) / (0.05 * math.log(4) + 1)
    check("yarn mscale/mscale_all_dim", abs(rope.rope_parameters(1e6, d, ys3, 16384)[1] - want) < 1e-12)


def causal_prefix():
    torch.manual_seed(0)
    m = Transformer(cfg_of("qwen3")).double()
    ids = torch.randint(0, 300, (1, 12))
    full = m(ids)
    ok = all(torch.allclose(full[0, :t], m(ids[:, :t])[0], atol=1e-12) for t in (1, 5, 11))
    check("causal: prefix logits == full-sequence logits", ok)


def gqa_vs_mha():
    torch.manual_seed(1)
    g = Transformer(cfg_of("llama", num_key_value_heads=2)).double()
    m = Transformer(cfg_of("llama", num_key_value_heads=4)).double()
    sd = g.state_dict()
    for i in range(2):
        for p in ("k_proj", "v_proj"):
            w = sd[f"layers.{i}.self_attn.{p}.weight"].view(2, 16, 64)
            sd[f"layers.{i}.self_attn.{p}.weight"] = w.repeat_interleave(2, 0).reshape(64, 64)
    m.load_state_dict(sd)
    ids = torch.randint(0, 300, (1, 9))
    check("GQA == MHA with repeated kv heads", torch.allclose(g(ids), m(ids), atol=1e-12))


def qwen2_zero_bias_is_llama():
    torch.manual_seed(2)
    q = Transformer(cfg_of("qwen2")).double()
    with torch.no_grad():
        for n, p in q.named_parameters():
            if n.endswith("bias"):
                p.zero_()
    l = Transformer(cfg_of("llama")).double()
    l.load_state_dict({k: v for k, v in q.state_dict().items() if not k.endswith("bias")})
    ids = torch.randint(0, 300, (2, 7))
    check("qwen2 with zero biases == llama", torch.allclose(q(ids), l(ids), atol=1e-12))
    check("qwen2 has q/k/v biases, no o bias",
          hasattr(q.layers[0].self_attn.q_proj, "bias") and q.layers[0].self_attn.q_proj.bias is not None
          and q.layers[0].self_attn.o_proj.bias is None)


def qwen3_qk_norm():
    # With q/k-norm weights 1 and eps 0, scaling q_proj and k_proj rows by a constant changes
    # nothing (the norm is per head, before RoPE); in llama it would sharpen attention.
    torch.manual_seed(3)
    m = Transformer(cfg_of("qwen3", rms_norm_eps=0.0)).double()
    ids = torch.randint(0, 300, (1, 10))
    a = m(ids)
    m2 = copy.deepcopy(m)
    with torch.no_grad():
        for layer in m2.layers:
            layer.self_attn.q_proj.weight.mul_(3.0)
            layer.self_attn.k_proj.weight.mul_(0.5)
    check("qwen3 q/k norm is per head before RoPE", torch.allclose(a, m2(ids), atol=1e-10))


def io_round_trips():
    with tempfile.TemporaryDirectory() as d:
        t = {"a": torch.randn(3, 5), "b": torch.randn(7).to(torch.bfloat16),
             "c": torch.randn(2, 2).half()}
        write_safetensors(os.path.join(d, "x.safetensors"), t)
        with open(os.path.join(d, "x.safetensors"), "rb") as f:
            n = int.from_bytes(f.read(8), "little")
        back = read_safetensors(os.path.join(d, "x.safetensors"))
        check("safetensors round trip f32/bf16/f16",
              all(torch.equal(t[k], back[k]) and t[k].dtype == back[k].dtype for k in t)
              and n % 8 == 0)
        ids = torch.randint(0, 300, (1, 9))
        ref = None
        for i, (prefix, tie, shards, dt, nest) in enumerate([
                ("model.", False, 1, "f32", False), ("language_model.model.", False, 3, "f32", False),
                ("model.language_model.", False, 2, "f32", True)]):
            out = os.path.join(d, f"m{i}")
            make_model(out, arch="qwen2", hidden=64, heads=4, kv_heads=2, vocab=300, tie=tie,
                       prefix=prefix, shards=shards, dtype=dt, seed=7, nest_text_config=nest)
            _, m = load_hf_folder(out, torch.float64)
            lg = m(ids)
            ref = lg if ref is None else ref
            check(f"load prefix {prefix!r} shards={shards} nest={nest}", torch.equal(lg, ref))
        for dt in ("bf16", "f16"):
            out = os.path.join(d, dt)
            make_model(out, arch="llama", hidden=64, heads=4, vocab=300, dtype=dt, seed=7, tie=True)
            _, m = load_hf_folder(out, torch.float64)
            tdt = torch.bfloat16 if dt == "bf16" else torch.float16
            w = m.embed_tokens.weight
            check(f"{dt} weights are exactly representable", torch.equal(w, w.to(tdt).double()))
            check(f"{dt} tied model has no lm_head", not hasattr(m, "lm_head"))


def tokenizer_invariants():
    for V in (259, 512, 1000):
        tj = bpe_tokenizer.tokenizer_json(V)
        vocab, merges = tj["model"]["vocab"], tj["model"]["merges"]
        ok = len(vocab) == V - 3 and sorted(vocab.values()) == list(range(V - 3))
        ok &= all(a in vocab and b in vocab and a + b in vocab for a, b in merges)
        ok &= [t["id"] for t in tj["added_tokens"]] == [V - 3, V - 2, V - 1]
        ok &= list(vocab)[:256] == list(bpe_tokenizer.BYTE_CHARS.values())
        check(f"tokenizer V={V}: ids dense, merges closed, specials on top", ok)


if __name__ == "__main__":
    torch.set_num_threads(1)
    torch.manual_seed(0)
    for fn in (rope_vs_complex, rope_scaling_props, causal_prefix, gqa_vs_mha,
               qwen2_zero_bias_is_llama, qwen3_qk_norm, io_round_trips, tokenizer_invariants):
        fn()
    n_fail = results.count(False)
    print(f"{results.count(True)} passed, {n_fail} failed")
    sys.exit(1 if n_fail else 0)
