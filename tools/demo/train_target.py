#!/usr/bin/python3
"""Train the demo target (a tiny Qwen3ForCausalLM) on stdlib source + synthesized chats and
write it as a Hugging Face folder (config.json, generation_config.json, bf16
model.safetensors next to the tokenizer files that train_tokenizer.py put there).

  nice -n 10 /usr/bin/python3 tools/demo/train_target.py            # train (resumes) + export
  /usr/bin/python3 tools/demo/train_target.py --bench 20            # time 20 steps, exit
  /usr/bin/python3 tools/demo/train_target.py --export-only         # export last checkpoint

Deterministic: fixed seeds, 1 thread, the batch of step s is drawn from an RNG seeded with
(seed, s), so a resumed run sees exactly the batches an uninterrupted one would.
"""
import argparse
import json
import math
import os
import sys
import time

import ctypes

# Page faults are very expensive on this VM (~12 us per 4 KiB page): glibc returns big freed
# blocks to the kernel (mmap'd allocations, heap trimming), so every step re-faults ~1 GB of
# activations. Keep freed memory in the heap instead (mallopt: M_MMAP_THRESHOLD=-3,
# M_TRIM_THRESHOLD=-1, M_TOP_PAD=-2). This alone makes a training step ~2x faster here.
try:
    _libc = ctypes.CDLL("libc.so.6")
    _libc.mallopt(-3, 1 << 30)
    _libc.mallopt(-1, 2**31 - 1)
    _libc.mallopt(-2, 256 << 20)
except OSError:
    pass

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import corpus  # noqa: E402

sys.path.insert(0, os.path.join(corpus.REPO, "tools"))
from reference.transformer import ModelConfig, Transformer  # noqa: E402
from reference.safetensors_io import write_model_tensors  # noqa: E402

OUT_DIR = os.path.join(corpus.REPO, "models/demo/target")
CKPT = os.path.join(corpus.CACHE_DIR, "target_ckpt.pt")
SEQ = 256


def hf_config(vocab_size, layers, tok):
    return {
        "architectures": ["Qwen3ForCausalLM"],
        "model_type": "qwen3",
        "attention_bias": False,
        "attention_dropout": 0.0,
        "bos_token_id": tok.added["<|endoftext|>"],     # as Qwen3 does; no bos is prepended
        "eos_token_id": tok.added["<|im_end|>"],
        "head_dim": 64,
        "hidden_act": "silu",
        "hidden_size": 256,
        "initializer_range": 0.02,
        "intermediate_size": 768,
        "max_position_embeddings": 4096,
        "max_window_layers": layers,
        "num_attention_heads": 4,
        "num_hidden_layers": layers,
        "num_key_value_heads": 2,
        "rms_norm_eps": 1e-6,
        "rope_scaling": None,
        "rope_theta": 1000000.0,
        "sliding_window": None,
        "tie_word_embeddings": True,
        "torch_dtype": "bfloat16",
        "use_cache": True,
        "use_sliding_window": False,
        "vocab_size": vocab_size,
    }


def padded_vocab(n_tokens):
    # multiple of 64 with at least one unnamed id after the added tokens (DFlash mask id)
    return (n_tokens + 1 + 63) // 64 * 64


def init_weights(model, std=0.02):
    # nn.Embedding's N(0, 1) default is far too large for a tied LM head; use HF's N(0, 0.02)
    g = torch.Generator().manual_seed(0)
    for name, p in model.named_parameters():
        if p.dim() == 2:
            with torch.no_grad():
                p.copy_(torch.randn(p.shape, generator=g) * std)


class Batches:
    """Rows of SEQ+1 tokens: a fraction from the chat stream starting at a conversation start
    (so the model sees prompts followed by answers), the rest at random offsets of the raw
    source stream."""

    def __init__(self, streams, split, chat_frac):
        self.raw = streams[split]
        self.chat = streams["chat_" + split]
        self.starts = streams[f"chat_{split}_starts"]
        self.starts = self.starts[self.starts < len(self.chat) - SEQ - 1]
        self.chat_frac = chat_frac

    def get(self, rng, n):
        n_chat = int(round(n * self.chat_frac))
        rows = []
        for s in rng.choice(self.starts, n_chat):
            rows.append(self.chat[s:s + SEQ + 1])
        for s in rng.integers(0, len(self.raw) - SEQ - 1, n - n_chat):
            rows.append(self.raw[s:s + SEQ + 1])
        return torch.from_numpy(np.stack(rows).astype(np.int64))


def loss_fn(model, batch, amp=True):
    # bf16 autocast: this CPU has AVX512-BF16, where oneDNN's bf16 matmuls run ~3x faster
    # than fp32; master weights, norms, softmax and the loss stay fp32.
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
        logits = model(batch[:, :-1])
    logits = logits.float()
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch[:, 1:].reshape(-1))


@torch.no_grad()
def evaluate(model, batches):
    model.eval()
    out = [float(loss_fn(model, b)) for b in batches]
    model.train()
    return sum(out) / len(out)


def lr_at(step, args):
    if step < args.warmup:
        return args.lr * (step + 1) / args.warmup
    t = (step - args.warmup) / max(1, args.steps - args.warmup)
    return args.lr * (args.min_lr_frac + (1 - args.min_lr_frac) * 0.5 * (1 + math.cos(math.pi * t)))


def export(model, cfg_dict, tok):
    os.makedirs(OUT_DIR, exist_ok=True)
    sd = model.hf_state_dict("model.")          # tied: no lm_head.weight
    write_model_tensors(OUT_DIR, sd, dtype="bf16")
    with open(os.path.join(OUT_DIR, "config.json"), "w") as f:
        json.dump(cfg_dict, f, indent=2)
        f.write("\n")
    gen = {"bos_token_id": cfg_dict["bos_token_id"],
           "eos_token_id": [tok.added["<|im_end|>"], tok.added["<|endoftext|>"]],
           "pad_token_id": tok.added["<|endoftext|>"], "do_sample": False}
    with open(os.path.join(OUT_DIR, "generation_config.json"), "w") as f:
        json.dump(gen, f, indent=2)
        f.write("\n")
    print("wrote", OUT_DIR, os.path.getsize(os.path.join(OUT_DIR, "model.safetensors")), "bytes")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--steps", type=int, default=1500)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--min-lr-frac", type=float, default=0.1)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--wd", type=float, default=0.1)
    ap.add_argument("--chat-frac", type=float, default=0.35)
    ap.add_argument("--eval-every", type=int, default=200)
    ap.add_argument("--ckpt-every", type=int, default=100)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--bench", type=int, default=0, help="time N steps and exit")
    ap.add_argument("--fp32", action="store_true", help="no bf16 autocast")
    ap.add_argument("--export-only", action="store_true")
    ap.add_argument("--fresh", action="store_true", help="ignore an existing checkpoint")
    args = ap.parse_args()
    torch.set_num_threads(1)   # shared 2-core machine; 1 thread is also fastest at this size
    torch.manual_seed(args.seed)

    tok = corpus.Tokenizer(os.path.join(OUT_DIR, "tokenizer.json"))
    n_tok = len(tok.vocab) + len(tok.added)
    cfg_dict = hf_config(padded_vocab(n_tok), args.layers, tok)
    model = Transformer(ModelConfig.from_hf(cfg_dict))
    init_weights(model)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"vocab {n_tok} tokens -> {cfg_dict['vocab_size']} rows, mask id {n_tok}; "
          f"{args.layers} layers, {n_params} params ({2 * n_params / 2**20:.2f} MiB bf16)")

    decay = [p for n, p in model.named_parameters() if p.dim() == 2 and "embed" not in n]
    other = [p for n, p in model.named_parameters() if not (p.dim() == 2 and "embed" not in n)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.wd},
                             {"params": other, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95), eps=1e-8)
    step, log = 0, []
    if os.path.exists(CKPT) and not args.fresh and not args.bench:
        ck = torch.load(CKPT)
        model.load_state_dict(ck["model"])
        opt.load_state_dict(ck["opt"])
        step, log = ck["step"], ck["log"]
        print(f"resumed at step {step}")
    if args.export_only:
        export(model, cfg_dict, tok)
        return

    t0 = time.time()
    streams = corpus.token_streams(OUT_DIR)
    print("streams:", {k: len(v) for k, v in streams.items()}, f"({time.time() - t0:.1f}s)")
    train = Batches(streams, "train", args.chat_frac)
    held = Batches(streams, "heldout", args.chat_frac)
    erng = np.random.default_rng([args.seed, 999])
    eval_sets = {"heldout": [held.get(erng, args.batch) for _ in range(4)],
                 "train": [train.get(erng, args.batch) for _ in range(4)]}

    model.train()
    t_start, tok_seen = time.time(), 0
    while step < args.steps:
        if args.bench and step == args.bench:
            dt = time.time() - t_start
            print(f"{args.bench} steps in {dt:.1f}s: {args.bench / dt:.3f} steps/s, "
                  f"{args.bench * args.batch * SEQ / dt:.0f} tok/s")
            return
        batch = train.get(np.random.default_rng([args.seed, step]), args.batch)
        for g in opt.param_groups:
            g["lr"] = lr_at(step, args)
        loss = loss_fn(model, batch, amp=not args.fp32)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        tok_seen += batch.numel()
        if step % 25 == 0:
            print(f"step {step} loss {float(loss):.3f} lr {lr_at(step, args):.2e} "
                  f"{tok_seen / (time.time() - t_start):.0f} tok/s", flush=True)
        if step % args.eval_every == 0 or step == args.steps:
            ev = {k: round(evaluate(model, v), 4) for k, v in eval_sets.items()}
            log.append({"step": step, "train_loss": float(loss), **ev,
                        "elapsed_s": round(time.time() - t_start, 1)})
            print("EVAL", json.dumps(log[-1]), flush=True)
        if step % args.ckpt_every == 0 or step == args.steps:
            os.makedirs(corpus.CACHE_DIR, exist_ok=True)
            torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step,
                        "log": log, "args": vars(args)}, CKPT + ".tmp")
            os.replace(CKPT + ".tmp", CKPT)
    with open(os.path.join(corpus.CACHE_DIR, "target_log.json"), "w") as f:
        json.dump(log, f, indent=1)
    export(model, cfg_dict, tok)


if __name__ == "__main__":
    main()
