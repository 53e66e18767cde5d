#!/usr/bin/python3
"""Write a random-weight model in the real Hugging Face folder layout, for any shape.

  make_model.py --out DIR --arch qwen3 --hidden 256 --layers 2 --heads 4 --kv-heads 2 \
      --head-dim 64 --ffn 512 --vocab 1024 --no-tie --dtype bf16 --shards 2 --seed 1

Writes config.json, generation_config.json, model.safetensors (or shards + index.json),
tokenizer.json and tokenizer_config.json. Importable: make_model(out_dir, **kwargs).
"""
import argparse
import json
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reference import bpe_tokenizer  # noqa: E402
from reference.safetensors_io import write_model_tensors, st_dtype  # noqa: E402
from reference.transformer import ARCH_NAMES, ModelConfig, Transformer  # noqa: E402

# Planted-bigram strength (in logit standard deviations) and the tied models' embedding std.
# Calibrated by measurement on 2-3 layer models: the median top-1 margin is ~2 logit std, the
# smallest ~0.05, and block-32 4-bit weights still keep >= 90% of the argmaxes.
BIGRAM = 3.0
EMB_TIED = 0.05
TIED_WRITE = 0.8  # tied memory writes a weaker vector: E_pi(t) is read back at full norm
TORCH_DTYPE_NAMES = {"F32": "float32", "BF16": "bfloat16", "F16": "float16"}


def hf_config(arch, hidden, layers, heads, kv_heads, head_dim, ffn, vocab, tie, dtype,
              rope_theta, rope_scaling, max_pos, nest_text_config):
    """config.json with the keys HF writes for these architectures."""
    ids = bpe_tokenizer.special_ids(vocab)
    text = {
        "model_type": arch, "vocab_size": vocab, "hidden_size": hidden,
        "intermediate_size": ffn, "num_hidden_layers": layers, "num_attention_heads": heads,
        "num_key_value_heads": kv_heads, "head_dim": head_dim, "hidden_act": "silu",
        "max_position_embeddings": max_pos, "initializer_range": 0.02, "rms_norm_eps": 1e-6,
        "use_cache": True, "rope_theta": rope_theta, "rope_scaling": rope_scaling,
        "attention_dropout": 0.0, "tie_word_embeddings": tie,
        "bos_token_id": ids["<|endoftext|>"], "eos_token_id": ids["<|im_end|>"],
        "torch_dtype": TORCH_DTYPE_NAMES[dtype],
    }
    if arch in ("qwen2", "qwen3"):
        text.update(use_sliding_window=False, sliding_window=None, max_window_layers=layers)
    if arch in ("qwen3", "llama"):
        text["attention_bias"] = False
    if arch == "llama":
        text.update(mlp_bias=False, pretraining_tp=1)
    top = {"architectures": [ARCH_NAMES[arch]], "transformers_version": "4.51.0"}
    if nest_text_config:
        # Multimodal-style: text keys in text_config, a few repeated at the top as HF does.
        return {**top, "model_type": arch, "tie_word_embeddings": tie,
                "torch_dtype": text["torch_dtype"], "text_config": text}
    return {**top, **text}


@torch.no_grad()
def init_weights(model, seed, bigram=BIGRAM):
    """Random weights that keep activations O(1) at every depth and logits well spread:
    projections ~ N(0, 1/fan_in) (residual outputs scaled by 1/sqrt(2*layers)), norms
    N(1, 0.1) so they matter, biases N(0, 0.1).

    Pure noise makes a poor test model: top-1 and top-2 logits are nearly tied at many
    positions, so argmax checks flip on rounding noise. Trained models are confident, mostly
    from bigram statistics, so a random bigram permutation pi is planted: the logit of pi(t)
    after token t gets a boost of about `bigram` logit standard deviations. Attention and the
    other layers still move every logit and often override the bigram, so greedy text varies.
    Untied: row pi(t) of lm_head gets a component along E_t (the residual stream keeps E_t).
    Tied: the layer-0 MLP is a key-value memory (neuron j fires for token t_j and writes
    E_pi(t_j)); embeddings are small so a token does not mostly predict itself."""
    cfg = model.cfg
    H, V, L = cfg.hidden_size, cfg.vocab_size, cfg.num_hidden_layers
    g = torch.Generator().manual_seed(seed)

    def randn(*shape):
        return torch.randn(shape, generator=g, dtype=torch.float64)

    resid = 1.0 / math.sqrt(2 * L)
    for name, p in model.named_parameters():
        if name.endswith("norm.weight"):
            p.copy_(1.0 + 0.1 * randn(*p.shape))
        elif name.endswith(".bias"):
            p.copy_(0.1 * randn(*p.shape))
        elif name.endswith(("o_proj.weight", "down_proj.weight")):
            p.copy_(randn(*p.shape) * (resid / math.sqrt(p.shape[1])))
        elif name != "embed_tokens.weight":
            p.copy_(randn(*p.shape) / math.sqrt(p.shape[1]))
    plant_bigram(model, g, randn, bigram, model.layers[0].self_attn.o_proj)


@torch.no_grad()
def plant_bigram(model, g, randn, bigram, mixer_out):
    """The planted bigram of init_weights (its docstring says why), for any model with
    embed_tokens, lm_head, layers[0].mlp and a config: a random permutation pi drawn from g;
    untied, row pi(t) of lm_head gains a component along E_t; tied, layer 0's MLP becomes a
    key-value memory from E_t to E_pi(t), and layer 0's mixer output `mixer_out` is scaled
    down so E_t stays readable by that MLP. make_qwen35.py uses it too."""
    cfg = model.cfg
    H, V, L = cfg.hidden_size, cfg.vocab_size, cfg.num_hidden_layers
    perm = torch.randperm(V, generator=g)
    E = model.embed_tokens.weight
    if not cfg.tie_word_embeddings:
        E.copy_(randn(V, H))
        W = model.lm_head.weight
        W.mul_(2.0)  # logit std ~2
        unit = E / E.norm(dim=1, keepdim=True)
        # n(h) has norm ~sqrt(H) and keeps roughly half of its direction along E_t.
        W[perm] += unit * (bigram * 2.0 / (0.5 * math.sqrt(H)))
        return
    e = EMB_TIED
    E.copy_(randn(V, H) * e)
    mixer_out.weight.mul_(0.3 * e * math.sqrt(2 * L))  # keep E_t readable by MLP
    mlp = model.layers[0].mlp
    n_mem = min(cfg.intermediate_size, V)
    keys = torch.randperm(V, generator=g)[:n_mem]
    unit = E[keys] / E[keys].norm(dim=1, keepdim=True)
    kappa = 4.0 / math.sqrt(H)  # matching neuron: pre-activation ~4, others ~N(0, 1/16)
    mlp.gate_proj.weight[:n_mem] = unit * kappa
    mlp.up_proj.weight[:n_mem] = unit * kappa
    # act ~ silu(4)*4 ~ 15.7 for the matching neuron, so the written vector has norm
    # ~bigram*TIED_WRITE; tokens beyond the first n_mem keys get no planted bigram.
    tgt = E[perm[keys]] / E[perm[keys]].norm(dim=1, keepdim=True)
    mlp.down_proj.weight[:, :n_mem] = tgt.T * (bigram * TIED_WRITE / 15.7)


def make_model(out_dir, arch="qwen3", hidden=128, layers=2, heads=4, kv_heads=None,
               head_dim=None, ffn=None, vocab=512, tie=False, dtype="f32", prefix="model.",
               shards=1, seed=0, rope_theta=10000.0, rope_scaling=None, max_pos=None,
               nest_text_config=False, config=None):
    """Write the model folder and return its ModelConfig. `config` (a whole config.json dict)
    overrides the shape arguments."""
    dtype = st_dtype(dtype)
    if config is None:
        kv_heads = kv_heads or heads
        head_dim = head_dim or hidden // heads
        ffn = ffn or 3 * hidden
        if max_pos is None:
            # yarn: keep max_position_embeddings = factor * original so both HF readings of
            # the yarn factor agree.
            rs = rope_scaling or {}
            orig = rs.get("original_max_position_embeddings")
            max_pos = int(rs["factor"] * orig) if orig and "factor" in rs else 4096
        config = hf_config(arch, hidden, layers, heads, kv_heads, head_dim, ffn, vocab, tie,
                           dtype, rope_theta, rope_scaling, max_pos, nest_text_config)
    cfg = ModelConfig.from_hf(config)
    torch.manual_seed(seed)
    model = Transformer(cfg).double()
    init_weights(model, seed)
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    ids = bpe_tokenizer.special_ids(cfg.vocab_size)
    with open(os.path.join(out_dir, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": ids["<|endoftext|>"],
                   "eos_token_id": [ids["<|im_end|>"], ids["<|endoftext|>"]],
                   "pad_token_id": ids["<|endoftext|>"], "transformers_version": "4.51.0"},
                  f, indent=2)
    write_model_tensors(out_dir, model.hf_state_dict(prefix), dtype=dtype, shards=shards)
    bpe_tokenizer.write_tokenizer(out_dir, cfg.vocab_size)
    return cfg


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("--out", required=True)
    ap.add_argument("--arch", choices=["qwen3", "qwen2", "llama"], default="qwen3")
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int)
    ap.add_argument("--head-dim", type=int)
    ap.add_argument("--ffn", type=int)
    ap.add_argument("--vocab", type=int, default=512)
    ap.add_argument("--tie", dest="tie", action="store_true")
    ap.add_argument("--no-tie", dest="tie", action="store_false")
    ap.set_defaults(tie=False)
    ap.add_argument("--dtype", choices=["f32", "bf16", "f16"], default="f32")
    ap.add_argument("--prefix", default="model.",
                    choices=["model.", "language_model.model.", "model.language_model."])
    ap.add_argument("--nest-text-config", action="store_true",
                    help="put the text keys under config.json's text_config")
    ap.add_argument("--shards", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rope-theta", type=float, default=10000.0)
    ap.add_argument("--rope-scaling-json", help="rope_scaling dict as JSON")
    ap.add_argument("--max-pos", type=int)
    ap.add_argument("--config-json", help="a whole config.json (JSON text or a file path)")
    a = ap.parse_args(argv)
    config = None
    if a.config_json:
        text = a.config_json
        if os.path.exists(text):
            with open(text) as f:
                text = f.read()
        config = json.loads(text)
    torch.set_num_threads(1)
    cfg = make_model(a.out, arch=a.arch, hidden=a.hidden, layers=a.layers, heads=a.heads,
                     kv_heads=a.kv_heads, head_dim=a.head_dim, ffn=a.ffn, vocab=a.vocab,
                     tie=a.tie, dtype=a.dtype, prefix=a.prefix, shards=a.shards, seed=a.seed,
                     rope_theta=a.rope_theta,
                     rope_scaling=json.loads(a.rope_scaling_json) if a.rope_scaling_json else None,
                     max_pos=a.max_pos, nest_text_config=a.nest_text_config, config=config)
    print(json.dumps({"out": a.out, "arch": cfg.arch, "vocab": cfg.vocab_size,
                      "layers": cfg.num_hidden_layers}))


if __name__ == "__main__":
    main()
