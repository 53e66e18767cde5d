#!/usr/bin/python3
"""Write a z-lab DFlash or DFlash2 draft folder as the GGUF llama.cpp's convert_hf_to_gguf.py
makes of it (general.architecture "dflash"): for tests of dflash's GGUF draft loader (DFlash v1
only; dflash reads DFlash2 drafts from their folder) and for llama-server's
`-md F.gguf --spec-type draft-dflash`.

  draft_gguf.py --draft DIR --out F.gguf [--target TARGET.gguf] [--matrices same|q4_0|q8_0|q4_k|q6_k]

The format, as llama.cpp publishes it:
  metadata  dflash.block_count, .embedding_length, .feed_forward_length,
            .attention.head_count, .attention.head_count_kv, .attention.key_length,
            .attention.value_length, .attention.layer_norm_rms_epsilon, .rope.freq_base,
            .context_length (max_position_embeddings; llama.cpp's loader requires it),
            .block_size, .target_layers (each z-lab target_layer_id + 1: llama.cpp taps
            the input of a layer, i.e. the output of the one before), and
            tokenizer.ggml.mask_token_id; DFlash2 adds .conv_kernel_size, .conv_group_size,
            .selector_rank, .selector_top_k and, where the config has them, .logit_scale
            (output_multiplier), .embedding_scale, .final_logit_softcapping
  tensors   fc.weight, enc.output_norm.weight (hidden_norm), output_norm.weight (norm),
            blk.N.{attn_q,attn_k,attn_v,attn_output,attn_q_norm,attn_k_norm,attn_norm,
            ffn_norm,ffn_gate,ffn_up,ffn_down}.weight; no token_embd / output (the draft
            uses the target's); DFlash2 adds blk.N.{attn,ffn}_conv_base (F32),
            blk.N.{attn,ffn}_conv_proj.weight and selector_{predecessor,successor,hidden}.weight.
            Vectors are stored F32, matrices in the folder's dtype, or with --matrices as
            Q4_0 / Q8_0 (ggml's reference rounding) or K-quant bytes from tools/kquant.py
            where the rows allow (the selector codebooks keep the folder's dtype).
The real converter also copies the target's tokenizer into the file, and llama.cpp needs it
(its speculative decoding checks that draft and target vocabularies agree): --target copies
every tokenizer.* key of the target's GGUF (the draft's mask_token_id kept). dflash reads the
tokenizer from the target, so without --target the writer leaves it out.
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
LAYER_NAMES.update({  # DFlash2
    "attention_conv.base_kernel": "attn_conv_base", "attention_conv.kernel_projection.weight": "attn_conv_proj.weight",
    "mlp_conv.base_kernel": "ffn_conv_base", "mlp_conv.kernel_projection.weight": "ffn_conv_proj.weight",
})
TOP_NAMES = {"fc.weight": "fc.weight", "hidden_norm.weight": "enc.output_norm.weight",
             "norm.weight": "output_norm.weight",
             "candidate_selector.predecessor_codebook": "selector_predecessor.weight",
             "candidate_selector.successor_codebook": "selector_successor.weight",
             "candidate_selector.hidden_projection.weight": "selector_hidden.weight"}
KEEP_DTYPE = ("selector_predecessor.weight", "selector_successor.weight")
F32_NAMES = ("_conv_base",)  # used by ggml_mul: stored F32 as the norms


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


def _round_away(x):
    return np.sign(x) * np.floor(np.abs(x) + np.float32(0.5))


def quantize_q4_0(w):
    """ggml's quantize_row_q4_0_ref: per 32 values an f16 scale d = (signed max |x|) / -8 and
    nibbles min(15, trunc(x/d + 8.5)), value j in the low nibble of byte j, j+16 in the high one."""
    x = np.ascontiguousarray(w, dtype=np.float32).reshape(-1, 32)
    idx = np.abs(x).argmax(axis=1)
    mx = x[np.arange(len(x)), idx]
    d = (mx / np.float32(-8)).astype(np.float32)
    inv = np.where(d != 0, np.float32(1) / np.where(d != 0, d, 1), 0).astype(np.float32)
    q = np.clip(np.trunc(x * inv[:, None] + np.float32(8.5)), 0, 15).astype(np.uint8)
    qs = q[:, :16] | (q[:, 16:] << 4)
    return np.concatenate([d.astype("<f2").view(np.uint8).reshape(-1, 2), qs], axis=1).tobytes()


def quantize_q8_0(w):
    """ggml's quantize_row_q8_0_ref: per 32 values an f16 scale max|x| / 127 and int8 round(x/d)."""
    x = np.ascontiguousarray(w, dtype=np.float32).reshape(-1, 32)
    d = (np.abs(x).max(axis=1) / np.float32(127)).astype(np.float32)
    inv = np.where(d != 0, np.float32(1) / np.where(d != 0, d, 1), 0).astype(np.float32)
    q = _round_away(x * inv[:, None]).astype(np.int8)
    return np.concatenate([d.astype("<f2").view(np.uint8).reshape(-1, 2), q.view(np.uint8)], axis=1).tobytes()


SIMPLE_QUANTS = {"q4_0": (2, quantize_q4_0), "q8_0": (8, quantize_q8_0)}


def tensor_bytes(t, matrices, name=""):
    if t.dim() == 1 or name.endswith(F32_NAMES):
        return 0, t.to(torch.float32).numpy().astype("<f4").tobytes()
    if name in KEEP_DTYPE or (matrices != "same" and t.shape[-1] % (256 if matrices.endswith("_k") else 32)):
        matrices = "same"
    if matrices in SIMPLE_QUANTS:
        tt, fn = SIMPLE_QUANTS[matrices]
        return tt, fn(t.to(torch.float32).numpy())
    if matrices in ("q4_k", "q6_k"):
        return kquant.GGML_TYPE[matrices], kquant.quantize(t.to(torch.float32).numpy(), matrices)
    if t.dtype == torch.bfloat16:
        return 30, t.contiguous().view(torch.int16).numpy().astype("<i2").tobytes()
    if t.dtype == torch.float16:
        return 1, t.numpy().astype("<f2").tobytes()
    return 0, t.to(torch.float32).numpy().astype("<f4").tobytes()


def write_draft_gguf(draft_dir, out, matrices="same", target_layers=None, target_gguf=None):
    """target_layers: the stored dflash.target_layers (default: the config's ids + 1);
    target_gguf: the target's GGUF, whose tokenizer.* keys are copied (llama.cpp needs them)."""
    with open(os.path.join(draft_dir, "config.json")) as f:
        cfg = json.load(f)
    ids = dflash_key(cfg, "target_layer_ids")
    if ids is None and target_layers is None:
        raise ValueError("the draft's config names no target_layer_ids (llama.cpp's converter needs them)")
    heads = cfg["num_attention_heads"]
    head_dim = cfg.get("head_dim") or cfg["hidden_size"] // heads
    rope_theta = cfg.get("rope_theta") or (cfg.get("rope_parameters") or {}).get("rope_theta") or 1e6
    a = "dflash."
    kv = [("general.architecture", G.STRING, "dflash"),
          ("general.name", G.STRING, os.path.basename(os.path.normpath(draft_dir))),
          (a + "context_length", G.U32, cfg.get("max_position_embeddings") or 40960),
          (a + "block_count", G.U32, cfg["num_hidden_layers"]),
          (a + "embedding_length", G.U32, cfg["hidden_size"]),
          (a + "feed_forward_length", G.U32, cfg["intermediate_size"]),
          (a + "attention.head_count", G.U32, heads),
          (a + "attention.head_count_kv", G.U32, cfg.get("num_key_value_heads", heads)),
          (a + "attention.key_length", G.U32, head_dim),
          (a + "attention.value_length", G.U32, head_dim),
          (a + "attention.layer_norm_rms_epsilon", G.F32, cfg.get("rms_norm_eps", 1e-6)),
          (a + "rope.freq_base", G.F32, rope_theta),
          (a + "block_size", G.U32, dflash_key(cfg, "block_size", 16)),
          (a + "target_layers", G.ARRAY, (G.I32, list(target_layers) if target_layers is not None
                                          else [i + 1 for i in ids])),
          ("tokenizer.ggml.mask_token_id", G.U32, dflash_key(cfg, "mask_token_id"))]
    if dflash_key(cfg, "conv_kernel_size") is not None:  # DFlash2
        kv += [(a + k, G.U32, int(dflash_key(cfg, k)))
               for k in ("conv_kernel_size", "conv_group_size", "selector_rank", "selector_top_k")]
    for hf_key, gg_key in (("output_multiplier", "logit_scale"), ("input_embedding_scale", "embedding_scale"),
                           ("final_logit_softcapping", "final_logit_softcapping")):
        v = dflash_key(cfg, hf_key)
        if v is not None and (gg_key != "final_logit_softcapping" or float(v) > 0):
            kv.append((a + gg_key, G.F32, float(v)))
    if target_gguf:
        kv += [e for e in G.read_kv(target_gguf)
               if e[0].startswith("tokenizer.") and e[0] != "tokenizer.ggml.mask_token_id"]
    tensors = []
    for hf, t in sorted(read_model_tensors(draft_dir).items()):
        name = gguf_name(hf)
        if name is None:
            continue
        tt, raw = tensor_bytes(t, matrices, name)
        tensors.append((name, list(reversed(t.shape)), tt, raw))
    G.write(out, kv, tensors)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--draft", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--target", help="the target's GGUF: copy its tokenizer.* keys (llama.cpp needs them)")
    ap.add_argument("--matrices", choices=["same", "q4_0", "q8_0", "q4_k", "q6_k"], default="same")
    a = ap.parse_args(argv)
    write_draft_gguf(a.draft, a.out, a.matrices, target_gguf=a.target)
    print(a.out)


if __name__ == "__main__":
    main()
