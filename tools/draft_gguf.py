#!/usr/bin/python3
"""Write a z-lab DFlash (v1) draft folder as the GGUF llama.cpp's convert_hf_to_gguf.py makes
of it (general.architecture "dflash"), for tests of dflash's GGUF draft loader.

  draft_gguf.py --draft DIR --out F.gguf [--matrices same|q4_k|q6_k]

The format, as llama.cpp publishes it:
  metadata  dflash.block_count, .embedding_length, .feed_forward_length,
            .attention.head_count, .attention.head_count_kv, .attention.key_length,
            .attention.value_length, .attention.layer_norm_rms_epsilon, .rope.freq_base,
            .block_size, .target_layers (each z-lab target_layer_id + 1: llama.cpp taps
            the input of a layer, i.e. the output of the one before), and
            tokenizer.ggml.mask_token_id
  tensors   fc.weight, enc.output_norm.weight (hidden_norm), output_norm.weight (norm),
            blk.N.{attn_q,attn_k,attn_v,attn_output,attn_q_norm,attn_k_norm,attn_norm,
            ffn_norm,ffn_gate,ffn_up,ffn_down}.weight; no token_embd / output (the draft
            uses the target's). Vectors are stored F32, matrices in the folder's dtype
            (or K-quant bytes from tools/kquant.py with --matrices).
The real converter also copies the target's tokenizer into the file; dflash reads the
tokenizer from the target, so this writer leaves it out.
"""
import argparse
import json
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf_io as G  # noqa: E402
import kquant  # noqa: E402
from reference.safetensors_io import read_model_tensors  # noqa: E402

LAYER_NAMES = {
    "self_attn.q_proj.weight": "attn_q.weight", "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.v_proj.weight": "attn_v.weight", "self_attn.o_proj.weight": "attn_output.weight",
    "self_attn.q_norm.weight": "attn_q_norm.weight", "self_attn.k_norm.weight": "attn_k_norm.weight",
    "input_layernorm.weight": "attn_norm.weight", "post_attention_layernorm.weight": "ffn_norm.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight", "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
}
TOP_NAMES = {"fc.weight": "fc.weight", "hidden_norm.weight": "enc.output_norm.weight",
             "norm.weight": "output_norm.weight"}


def gguf_name(hf):
    n = hf[len("model."):] if hf.startswith("model.") else hf
    if n in TOP_NAMES:
        return TOP_NAMES[n]
    parts = n.split(".", 2)
    if len(parts) == 3 and parts[0] == "layers" and parts[1].isdigit() and parts[2] in LAYER_NAMES:
        return f"blk.{parts[1]}.{LAYER_NAMES[parts[2]]}"
    return None  # embed_tokens / lm_head copies: llama.cpp's dflash arch has none


def dflash_key(cfg, k, default=None):
    d = cfg.get("dflash_config") or {}
    return d[k] if k in d else cfg.get(k, default)


def tensor_bytes(t, matrices):
    if t.dim() == 1:
        return 0, t.to(torch.float32).numpy().astype("<f4").tobytes()
    if matrices in ("q4_k", "q6_k"):
        return kquant.GGML_TYPE[matrices], kquant.quantize(t.to(torch.float32).numpy(), matrices)
    if t.dtype == torch.bfloat16:
        return 30, t.contiguous().view(torch.int16).numpy().astype("<i2").tobytes()
    if t.dtype == torch.float16:
        return 1, t.numpy().astype("<f2").tobytes()
    return 0, t.to(torch.float32).numpy().astype("<f4").tobytes()


def write_draft_gguf(draft_dir, out, matrices="same", target_layers=None):
    """target_layers: the stored dflash.target_layers (default: the config's ids + 1)."""
    with open(os.path.join(draft_dir, "config.json")) as f:
        cfg = json.load(f)
    ids = dflash_key(cfg, "target_layer_ids")
    if ids is None and target_layers is None:
        raise ValueError("the draft's config names no target_layer_ids (llama.cpp's converter needs them)")
    heads = cfg["num_attention_heads"]
    head_dim = cfg.get("head_dim") or cfg["hidden_size"] // heads
    a = "dflash."
    kv = [("general.architecture", G.STRING, "dflash"),
          ("general.name", G.STRING, os.path.basename(os.path.normpath(draft_dir))),
          (a + "block_count", G.U32, cfg["num_hidden_layers"]),
          (a + "embedding_length", G.U32, cfg["hidden_size"]),
          (a + "feed_forward_length", G.U32, cfg["intermediate_size"]),
          (a + "attention.head_count", G.U32, heads),
          (a + "attention.head_count_kv", G.U32, cfg.get("num_key_value_heads", heads)),
          (a + "attention.key_length", G.U32, head_dim),
          (a + "attention.value_length", G.U32, head_dim),
          (a + "attention.layer_norm_rms_epsilon", G.F32, cfg.get("rms_norm_eps", 1e-6)),
          (a + "rope.freq_base", G.F32, cfg.get("rope_theta", 1e6)),
          (a + "block_size", G.U32, dflash_key(cfg, "block_size", 16)),
          (a + "target_layers", G.ARRAY, (G.I32, list(target_layers) if target_layers is not None
                                          else [i + 1 for i in ids])),
          ("tokenizer.ggml.mask_token_id", G.U32, dflash_key(cfg, "mask_token_id"))]
    tensors = []
    for hf, t in sorted(read_model_tensors(draft_dir).items()):
        name = gguf_name(hf)
        if name is None:
            continue
        tt, raw = tensor_bytes(t, matrices)
        tensors.append((name, list(reversed(t.shape)), tt, raw))
    G.write(out, kv, tensors)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--draft", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--matrices", choices=["same", "q4_k", "q6_k"], default="same")
    a = ap.parse_args(argv)
    write_draft_gguf(a.draft, a.out, a.matrices)
    print(a.out)


if __name__ == "__main__":
    main()
