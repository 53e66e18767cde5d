#!/usr/bin/python3
"""Write a random-weight Qwen3.5 / Qwen3.6 hybrid checkpoint in the Hugging Face folder layout.

  make_qwen35.py --out DIR --hidden 64 --layers 8 --full-every 4 --linear-key-heads 2 \
      --linear-value-heads 6 --linear-key-dim 16 --linear-value-dim 16 --heads 4 --kv-heads 2 \
      --head-dim 32 --ffn 128 --vocab 384 --no-tie --form multimodal --dtype bf16 --seed 1

Writes config.json (the published key set, ../shared/qwen35-format.md §1: multimodal form
with text_config + vision_config, the flat Qwen3_5ForCausalLM form, or --form qwen3-next: the
flat dense Qwen3NextForCausalLM form of §1.3, whose linear layers store the fused, per-key-head
grouped in_proj_qkvz / in_proj_ba), generation_config.json,
model.safetensors (or shards + index) with the published per-tensor dtypes (§2.6: A_log F32,
the rest --dtype), and the tokenizer of tests/data/random_pair/target when the vocab holds its
384 ids (otherwise no tokenizer; the script says so). Importable: make_qwen35(out_dir, **kw).
"""
import argparse
import json
import math
import os
import shutil
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reference.qwen35 import FORMS, Qwen35Config, Qwen35Model  # noqa: E402
from reference.safetensors_io import write_model_tensors, st_dtype, DTYPES  # noqa: E402
from make_model import plant_bigram  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOKENIZER_DIR = os.path.join(REPO, "tests", "data", "random_pair", "target")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")
TOKENIZER_VOCAB = 384  # ids 0..380 BPE, 381 <|endoftext|>, 382 <|im_start|>, 383 <|im_end|>
# Planted-bigram strength: the same calibration as make_model.py (whose plant_bigram is used).
BIGRAM = 3.0
TORCH_DTYPE_NAMES = {"F32": "float32", "BF16": "bfloat16", "F16": "float16"}


def mrope_section(rotary_dim):
    """[11, 11, 10] for R = 64 (fmt §1.2); for other R the same split of R/2 frequencies:
    T gets the remainder first. Irrelevant for text (all three position rows are equal)."""
    s = rotary_dim // 2
    base, rem = divmod(s, 3)
    return [base + (rem > 0), base + (rem > 1), base]


def layer_types_for(layers, full_every, explicit=None):
    if explicit:
        names = {"F": "full_attention", "L": "linear_attention"}
        types = [names.get(t.strip(), t.strip()) for t in explicit.split(",")]
        if len(types) != layers:
            raise ValueError(f"--layer-types has {len(types)} entries for {layers} layers")
        return types
    # fmt §1.2: layer i is full attention iff (i+1) % interval == 0.
    return ["full_attention" if (i + 1) % full_every == 0 else "linear_attention"
            for i in range(layers)]


def special_ids(vocab):
    """<|endoftext|>, <|im_start|>, <|im_end|> on the top three ids (the copied tokenizer's
    layout when vocab == 384; the same rule without a tokenizer)."""
    if vocab >= TOKENIZER_VOCAB:
        return {"<|endoftext|>": 381, "<|im_start|>": 382, "<|im_end|>": 383}
    return {"<|endoftext|>": vocab - 3, "<|im_start|>": vocab - 2, "<|im_end|>": vocab - 1}


def hf_config(form, hidden, layers, types, full_every, heads, kv_heads, head_dim, nk, nv, dk,
              dv, conv_kernel, ffn, vocab, tie, dtype, rope_theta, partial_rotary, mtp):
    """config.json with the keys of fmt §1.2 (values for this shape)."""
    ids = special_ids(vocab)
    rotary = int(head_dim * partial_rotary)
    text = {
        "model_type": "qwen3_5_text",
        "vocab_size": vocab, "hidden_size": hidden, "intermediate_size": ffn,
        "num_hidden_layers": layers, "layer_types": types, "full_attention_interval": full_every,
        "num_attention_heads": heads, "num_key_value_heads": kv_heads, "head_dim": head_dim,
        "attn_output_gate": True, "partial_rotary_factor": partial_rotary,
        "rope_parameters": {"rope_type": "default", "rope_theta": rope_theta,
                            "partial_rotary_factor": partial_rotary,
                            "mrope_section": mrope_section(rotary), "mrope_interleaved": True},
        "linear_conv_kernel_dim": conv_kernel, "linear_key_head_dim": dk,
        "linear_value_head_dim": dv, "linear_num_key_heads": nk, "linear_num_value_heads": nv,
        "rms_norm_eps": 1e-6, "hidden_act": "silu", "tie_word_embeddings": tie,
        "max_position_embeddings": 262144, "mtp_num_hidden_layers": 1 if mtp else 0,
        "mtp_use_dedicated_embeddings": False, "mamba_ssm_dtype": "float32",
        "attention_bias": False, "attention_dropout": 0.0, "initializer_range": 0.02,
        "use_cache": True, "dtype": TORCH_DTYPE_NAMES[dtype],
        "bos_token_id": ids["<|endoftext|>"], "eos_token_id": ids["<|endoftext|>"],
        "pad_token_id": None,
    }
    if form == "causal-lm":
        return {"architectures": [FORMS[form]["arch"]], **text, "transformers_version": "4.57.0"}
    if form == "qwen3-next":
        # fmt §1.3: flat, the published Qwen3-Next key set: RoPE keys at the top level (plain
        # NeoX, no mRoPE section), no MTP keys, and the MoE keys of a dense model: num_experts
        # 0 (HF's default, 512, would make every layer a mixture of experts).
        nxt = {k: v for k, v in text.items() if k not in (
            "rope_parameters", "attn_output_gate", "mtp_num_hidden_layers",
            "mtp_use_dedicated_embeddings", "mamba_ssm_dtype")}
        nxt.update({"model_type": "qwen3_next", "rope_theta": rope_theta, "rope_scaling": None,
                    "partial_rotary_factor": partial_rotary, "num_experts": 0,
                    "num_experts_per_tok": 10, "decoder_sparse_step": 1, "mlp_only_layers": [],
                    "moe_intermediate_size": 512, "shared_expert_intermediate_size": 512,
                    "norm_topk_prob": True})
        return {"architectures": [FORMS[form]["arch"]], **nxt, "transformers_version": "4.57.0"}
    # fmt §1.1 multimodal: top-level ids are the published ones (a text-only reader ignores
    # them; with a tiny vocab they lie outside it). vision_config: the 27B values of fmt §1.1
    # except out_hidden_size, which is the text width; no vision tensors are written unless
    # --visual-stub.
    vision = {"model_type": "qwen3_5_vision", "depth": 27, "hidden_size": 1152,
              "intermediate_size": 4304, "num_heads": 16, "in_channels": 3, "patch_size": 16,
              "temporal_patch_size": 2, "spatial_merge_size": 2, "out_hidden_size": hidden,
              "num_position_embeddings": 2304}
    return {"architectures": [FORMS[form]["arch"]], "model_type": "qwen3_5",
            "image_token_id": 248056, "video_token_id": 248057,
            "vision_start_token_id": 248053, "vision_end_token_id": 248054,
            "tie_word_embeddings": tie, "text_config": text, "vision_config": vision,
            "transformers_version": "4.57.0"}


@torch.no_grad()
def init_weights(model, seed, zero_norms=False, bigram=BIGRAM):
    """Random weights with O(1) activations and well-spread logits:
    projections ~ N(0, 1/fan_in), residual-branch outputs (o_proj, out_proj, down_proj) scaled
    by 1/sqrt(2L); zero-centered norm weights w ~ N(0, 0.1) (effective 1+w), or exactly 0 with
    zero_norms (HF's initial value); linear_attn.norm ~ N(1, 0.1); conv taps ~ N(0, 1/K).
    Decays: A = exp(A_log) ~ U(0.02, 0.6), dt_bias ~ N(0, 0.5), so alpha = exp(-A softplus(a +
    dt_bias)) spreads over about (0.2, 1): the state remembers several rows (HF's own init,
    A ~ U(0, 16), would forget almost everything in one step). Planted bigram as make_model.py:
    untied: row pi(t) of lm_head gains a component along E_t; tied: layer 0's MLP is a
    key-value memory from E_t to E_pi(t)."""
    cfg = model.cfg
    H, V, L = cfg.hidden_size, cfg.vocab_size, cfg.num_hidden_layers
    g = torch.Generator().manual_seed(seed)

    def randn(*shape):
        return torch.randn(shape, generator=g, dtype=torch.float64)

    def rand(*shape):
        return torch.rand(shape, generator=g, dtype=torch.float64)

    resid = 1.0 / math.sqrt(2 * L)
    for name, p in model.named_parameters():
        if name.endswith("linear_attn.norm.weight"):
            p.copy_(1.0 + 0.1 * randn(*p.shape))
        elif name.endswith("norm.weight"):
            p.copy_(torch.zeros(p.shape) if zero_norms else 0.1 * randn(*p.shape))
        elif name.endswith("A_log"):
            p.copy_(torch.log(0.02 + 0.58 * rand(*p.shape)))
        elif name.endswith("dt_bias"):
            p.copy_(0.5 * randn(*p.shape))
        elif name.endswith("conv1d.weight"):
            p.copy_(randn(*p.shape) / math.sqrt(p.shape[-1]))
        elif name.endswith(("o_proj.weight", "out_proj.weight", "down_proj.weight")):
            p.copy_(randn(*p.shape) * (resid / math.sqrt(p.shape[1])))
        elif name != "embed_tokens.weight":
            p.copy_(randn(*p.shape) / math.sqrt(p.shape[1]))
    l0 = model.layers[0]
    mixer_out = l0.self_attn.o_proj if l0.kind == "full_attention" else l0.linear_attn.out_proj
    plant_bigram(model, g, randn, bigram, mixer_out)


@torch.no_grad()
def mtp_tensors(cfg, seed):
    """The 15 tensors of one MTP block, fmt §2.4 (random; the reference skips them)."""
    from reference.qwen35 import GatedAttention, MLP
    g = torch.Generator().manual_seed(seed + 1000)
    H = cfg.hidden_size
    out = {"mtp.fc.weight": torch.randn(H, 2 * H, generator=g, dtype=torch.float64) / math.sqrt(2 * H)}
    for n in ("pre_fc_norm_embedding", "pre_fc_norm_hidden", "norm"):
        out[f"mtp.{n}.weight"] = 0.1 * torch.randn(H, generator=g, dtype=torch.float64)
    for n in ("input_layernorm", "post_attention_layernorm"):
        out[f"mtp.layers.0.{n}.weight"] = 0.1 * torch.randn(H, generator=g, dtype=torch.float64)
    for sub, mod in (("self_attn", GatedAttention(cfg)), ("mlp", MLP(cfg))):
        for k, p in mod.state_dict().items():
            t = torch.randn(p.shape, generator=g, dtype=torch.float64)
            out[f"mtp.layers.0.{sub}.{k}"] = 0.1 * t if k.endswith("norm.weight") else \
                t / math.sqrt(p.shape[-1])
    return out


def fuse_linear_projections(sd, cfg):
    """fmt §1.3: Qwen3-Next's form of each linear layer's input projections. in_proj_qkvz
    [2*nk*dk + 2*nv*dv, H] holds, for key head g = 0..nk-1 in turn, q_g (dk rows), k_g (dk),
    then v and z of g's r = nv/nk value heads (value heads g*r .. g*r+r-1, r*dv rows each);
    in_proj_ba [2*nv, H] holds, per g, b then a of those r value heads."""
    nk, nv = cfg.linear_num_key_heads, cfg.linear_num_value_heads
    dk, dv, r = cfg.linear_key_head_dim, cfg.linear_value_head_dim, nv // nk
    out = {}
    for name, t in sd.items():
        if not name.endswith("linear_attn.in_proj_qkv.weight"):
            if not name.endswith(("linear_attn.in_proj_z.weight", "linear_attn.in_proj_b.weight",
                                  "linear_attn.in_proj_a.weight")):
                out[name] = t
            continue
        base = name[:-len("in_proj_qkv.weight")]
        qkv, z = t, sd[base + "in_proj_z.weight"]
        b, a = sd[base + "in_proj_b.weight"], sd[base + "in_proj_a.weight"]
        qkvz_rows, ba_rows = [], []
        for g in range(nk):
            qkvz_rows += [qkv[g * dk:(g + 1) * dk],                               # q_g
                          qkv[nk * dk + g * dk:nk * dk + (g + 1) * dk]]           # k_g
            vs = slice(g * r * dv, (g + 1) * r * dv)                              # heads g*r..
            qkvz_rows += [qkv[2 * nk * dk:][vs], z[vs]]                           # v_g, z_g
            ba_rows += [b[g * r:(g + 1) * r], a[g * r:(g + 1) * r]]
        out[base + "in_proj_qkvz.weight"] = torch.cat(qkvz_rows).contiguous()
        out[base + "in_proj_ba.weight"] = torch.cat(ba_rows).contiguous()
    return out


def stored_dtype(name, dtype, alt_small):
    """fmt §2.6: everything --dtype except linear_attn.A_log (always F32). For the two
    disputed 1-D tensors (only matters with bf16): default norm F32 / dt_bias BF16 (two
    transcriptions); alt_small: norm BF16 / dt_bias F32 (the third)."""
    if name.endswith("linear_attn.A_log"):
        return "F32"
    if dtype == "F32":
        return "F32"
    if name.endswith("linear_attn.norm.weight"):
        return dtype if alt_small else "F32"
    if name.endswith("linear_attn.dt_bias"):
        return "F32" if alt_small else dtype
    return dtype


def make_qwen35(out_dir, hidden=64, layers=8, full_every=4, layer_types=None,
                linear_key_heads=2, linear_value_heads=6, linear_key_dim=16, linear_value_dim=16,
                conv_kernel=4, heads=4, kv_heads=2, head_dim=32, partial_rotary=0.25,
                rope_theta=1e7, ffn=None, vocab=384, tie=False, form="causal-lm", dtype="bf16",
                alt_small_dtypes=False, mtp=False, visual_stub=False, zero_norms=False, shards=1,
                seed=0, quiet=True):
    """Write the folder; return (Qwen35Config, the float64 model holding exactly the values
    written (each tensor rounded through its stored dtype), whether a tokenizer was copied)."""
    dtype = st_dtype(dtype)
    ffn = ffn or 2 * hidden
    types = layer_types_for(layers, full_every, layer_types)
    config = hf_config(form, hidden, layers, types, full_every, heads, kv_heads, head_dim,
                       linear_key_heads, linear_value_heads, linear_key_dim, linear_value_dim,
                       conv_kernel, ffn, vocab, tie, dtype, rope_theta, partial_rotary, mtp)
    cfg = Qwen35Config.from_hf(config)
    model = Qwen35Model(cfg).double()
    init_weights(model, seed, zero_norms)
    tensors = {}
    sd = model.hf_state_dict(form)
    if form == "qwen3-next":
        sd = fuse_linear_projections(sd, cfg)
    for name, t in sd.items():
        tensors[name] = t.to(DTYPES[stored_dtype(name, dtype, alt_small_dtypes)][0])
    if mtp:
        for name, t in mtp_tensors(cfg, seed).items():
            tensors[name] = t.to(DTYPES[dtype][0])
    if visual_stub:
        if form != "multimodal":
            raise ValueError("--visual-stub needs --form multimodal")
        # A placeholder under model.visual.* (shape NOT that of vision_config) so tests can
        # check that readers skip the vision tower.
        tensors["model.visual.patch_embed.proj.weight"] = torch.randn(
            8, 3, 2, 2, 2, generator=torch.Generator().manual_seed(seed)).to(DTYPES[dtype][0])
    # The returned model holds the stored (rounded) values (the qwen3-next form read back
    # through the reference's own unpacking).
    model.load_hf_state_dict(tensors)
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    ids = special_ids(vocab)
    # fmt §1.2: generation_config eos holds <|im_end|> and <|endoftext|>.
    with open(os.path.join(out_dir, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": ids["<|endoftext|>"],
                   "eos_token_id": [ids["<|im_end|>"], ids["<|endoftext|>"]],
                   "pad_token_id": ids["<|endoftext|>"], "transformers_version": "4.57.0"},
                  f, indent=2)
    write_model_tensors(out_dir, tensors, dtype=None, shards=shards)
    copied = vocab >= TOKENIZER_VOCAB
    if copied:
        for fn in TOKENIZER_FILES:
            shutil.copyfile(os.path.join(TOKENIZER_DIR, fn), os.path.join(out_dir, fn))
    elif not quiet:
        print(f"no tokenizer written: vocab {vocab} < {TOKENIZER_VOCAB} ids of "
              f"{os.path.relpath(TOKENIZER_DIR, REPO)}", file=sys.stderr)
    return cfg, model, copied


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("--out", required=True)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--full-every", type=int, default=4,
                    help="layer i is full attention iff (i+1) %% N == 0 (fmt §1.2)")
    ap.add_argument("--layer-types", help="explicit comma list of F/L (or full names)")
    ap.add_argument("--linear-key-heads", type=int, default=2, help="nk")
    ap.add_argument("--linear-value-heads", type=int, default=6, help="nv (multiple of nk)")
    ap.add_argument("--linear-key-dim", type=int, default=16, help="dk")
    ap.add_argument("--linear-value-dim", type=int, default=16, help="dv")
    ap.add_argument("--conv-kernel", type=int, default=4)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--head-dim", type=int, default=32)
    ap.add_argument("--partial-rotary", type=float, default=0.25)
    ap.add_argument("--rope-theta", type=float, default=1e7)
    ap.add_argument("--ffn", type=int)
    ap.add_argument("--vocab", type=int, default=384)
    ap.add_argument("--tie", dest="tie", action="store_true")
    ap.add_argument("--no-tie", dest="tie", action="store_false")
    ap.set_defaults(tie=False)
    ap.add_argument("--form", choices=list(FORMS), default="causal-lm")
    ap.add_argument("--dtype", choices=["bf16", "f32"], default="bf16")
    ap.add_argument("--alt-small-dtypes", action="store_true",
                    help="with bf16: linear_attn.norm BF16 and dt_bias F32 (default the reverse)")
    ap.add_argument("--mtp", action="store_true", help="also write a random mtp.* block")
    ap.add_argument("--visual-stub", action="store_true",
                    help="also write one placeholder model.visual.* tensor (multimodal form)")
    ap.add_argument("--zero-norms", action="store_true",
                    help="all zero-centered norm weights exactly 0 (HF init: effective weight 1)")
    ap.add_argument("--shards", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    cfg, _, copied = make_qwen35(
        a.out, hidden=a.hidden, layers=a.layers, full_every=a.full_every,
        layer_types=a.layer_types, linear_key_heads=a.linear_key_heads,
        linear_value_heads=a.linear_value_heads, linear_key_dim=a.linear_key_dim,
        linear_value_dim=a.linear_value_dim, conv_kernel=a.conv_kernel, heads=a.heads,
        kv_heads=a.kv_heads, head_dim=a.head_dim, partial_rotary=a.partial_rotary,
        rope_theta=a.rope_theta, ffn=a.ffn, vocab=a.vocab, tie=a.tie, form=a.form,
        dtype=a.dtype, alt_small_dtypes=a.alt_small_dtypes, mtp=a.mtp,
        visual_stub=a.visual_stub, zero_norms=a.zero_norms, shards=a.shards, seed=a.seed,
        quiet=False)
    print(json.dumps({"out": a.out, "form": a.form, "layer_types": cfg.layer_types,
                      "vocab": cfg.vocab_size, "tied": cfg.tie_word_embeddings,
                      "tokenizer": copied}))


if __name__ == "__main__":
    main()
