#!/usr/bin/python3
"""Train the Qwen3.5-architecture demo target (hybrid: 3 Gated DeltaNet layers + 1 gated
full-attention layer) on the dense demo target's corpus and tokenizer, and write it as a
Hugging Face folder in the official multimodal form (Qwen3_5ForConditionalGeneration,
text_config, tensors under model.language_model.).

  nice -n 10 /usr/bin/python3 tools/demo/train_target35.py --fresh  # train (resumes) + export
  /usr/bin/python3 tools/demo/train_target35.py --bench 10          # time 10 steps, exit
  /usr/bin/python3 tools/demo/train_target35.py --export-only       # export last checkpoint
  /usr/bin/python3 tools/demo/train_target35.py --eval-only         # loss of the exported folder

The model is tools/reference/qwen35.Qwen35Model; training runs its parameters through
qwen35_fast.forward (batched, chunked Gated DeltaNet: the same math up to rounding). The
exported bf16 folder is evaluated with the reference's own sequential forward.
Deterministic as train_target.py: 1 thread, the batch of step s comes from an RNG seeded
with (seed, s), checkpoints in out/demo/demo35/ resume with the same batches.
"""
import argparse
import json
import math
import os
import shutil
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import corpus  # noqa: E402
import qwen35_fast  # noqa: E402
import train_target as tt  # noqa: E402  (Batches, lr_at, padded_vocab, glibc mallopt)

sys.path.insert(0, os.path.join(corpus.REPO, "tools"))
from make_qwen35 import hf_config as qwen35_hf_config  # noqa: E402
from reference.qwen35 import Qwen35Config, Qwen35Model, load_hf_folder  # noqa: E402
from reference.safetensors_io import write_model_tensors  # noqa: E402

DENSE_DIR = os.path.join(corpus.REPO, "models/demo/target")
OUT_DIR = os.path.join(corpus.REPO, "models/demo35/target")
CACHE = os.path.join(corpus.CACHE_DIR, "demo35")
CKPT = os.path.join(CACHE, "target_ckpt.pt")
SEQ = tt.SEQ
# fmt §4.1: Qwen3.5's Split regex (letters may carry combining marks \p{M})
QWEN3_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
               r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN35_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}|"
                r" ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
SHAPE = dict(hidden=256, layers=4, full_every=4, heads=4, kv_heads=2, head_dim=64, nk=2, nv=4,
             dk=32, dv=32, conv_kernel=4, ffn=768, rope_theta=1e6, partial_rotary=0.25)


def hf_config(vocab, tok):
    """make_qwen35's config writer (the published key set, multimodal form) for this shape, with
    this tokenizer's ids: bos = eos = <|endoftext|> as Qwen3.5's text_config (generation_config
    adds <|im_end|>), max_position_embeddings 4096 as the dense demo. The top-level image/video
    ids are the published ones (outside this vocab; no vision input exists here)."""
    s = SHAPE
    types = ["full_attention" if (i + 1) % s["full_every"] == 0 else "linear_attention"
             for i in range(s["layers"])]
    d = qwen35_hf_config("multimodal", s["hidden"], s["layers"], types, s["full_every"],
                         s["heads"], s["kv_heads"], s["head_dim"], s["nk"], s["nv"], s["dk"],
                         s["dv"], s["conv_kernel"], s["ffn"], vocab, True, "BF16",
                         s["rope_theta"], s["partial_rotary"], False)
    eot = tok.added["<|endoftext|>"]
    d["text_config"].update(bos_token_id=eot, eos_token_id=eot, max_position_embeddings=4096)
    # a small vision tower description (no vision tensors are written; text-only readers
    # ignore it): 2 blocks of width 64
    d["vision_config"].update(depth=2, hidden_size=64, intermediate_size=128, num_heads=2)
    return d


@torch.no_grad()
def init_weights(model, seed):
    """Matrices and embedding N(0, 0.02) (as the dense demo); zero-centered norms 0 (weight 1),
    gated norm 1; GDN decays as FLA/Mamba2: A ~ U(1, 16), dt_bias = softplus^-1(dt) with dt
    log-uniform in [1e-3, 1e-1], so alpha = exp(-A softplus(a + dt_bias)) starts near (0.2, 1);
    conv taps U(-1/2, 1/2) (PyTorch's default for kernel 4)."""
    g = torch.Generator().manual_seed(seed)
    for name, p in model.named_parameters():
        if p.dim() == 2:
            p.copy_(torch.randn(p.shape, generator=g) * 0.02)
        elif name.endswith("A_log"):
            p.copy_(torch.log(1 + 15 * torch.rand(p.shape, generator=g)))
        elif name.endswith("dt_bias"):
            dt = torch.exp(math.log(1e-3) + torch.rand(p.shape, generator=g) * math.log(100))
            p.copy_(dt + torch.log(-torch.expm1(-dt)))
        elif name.endswith("conv1d.weight"):
            p.copy_(torch.rand(p.shape, generator=g) - 0.5)
        elif name.endswith("linear_attn.norm.weight"):
            p.fill_(1.0)
        elif name.endswith("norm.weight"):
            p.zero_()


def loss_fn(model, batch, amp=True):
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
        logits = qwen35_fast.forward(model, batch[:, :-1])
    logits = logits.float()
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch[:, 1:].reshape(-1))


@torch.no_grad()
def evaluate(model, batches):
    return sum(float(loss_fn(model, b)) for b in batches) / len(batches)


def export(model, cfg_dict, tok):
    os.makedirs(OUT_DIR, exist_ok=True)
    # real checkpoints: everything bf16 except linear_attn.A_log (F32), fmt §2.6
    sd = {k: v.detach().to(torch.float32 if k.endswith("A_log") else torch.bfloat16)
          for k, v in model.hf_state_dict("multimodal").items()}
    write_model_tensors(OUT_DIR, sd, dtype=None)
    with open(os.path.join(OUT_DIR, "config.json"), "w") as f:
        json.dump(cfg_dict, f, indent=2)
        f.write("\n")
    gen = {"bos_token_id": tok.added["<|endoftext|>"],
           "eos_token_id": [tok.added["<|im_end|>"], tok.added["<|endoftext|>"]],
           "pad_token_id": tok.added["<|endoftext|>"], "do_sample": False}
    with open(os.path.join(OUT_DIR, "generation_config.json"), "w") as f:
        json.dump(gen, f, indent=2)
        f.write("\n")
    print("wrote", OUT_DIR, os.path.getsize(os.path.join(OUT_DIR, "model.safetensors")), "bytes")


def write_tokenizer():
    """The dense demo's tokenizer files; tokenizer.json with only the Split regex changed to
    Qwen3.5's (it differs on combining marks only)."""
    os.makedirs(OUT_DIR, exist_ok=True)
    with open(os.path.join(DENSE_DIR, "tokenizer.json"), encoding="utf-8") as f:
        raw = f.read()
    split = json.loads(raw)["pre_tokenizer"]["pretokenizers"][0]
    assert split["type"] == "Split" and split["pattern"]["Regex"] == QWEN3_REGEX
    old, new = json.dumps(QWEN3_REGEX)[1:-1], json.dumps(QWEN35_REGEX)[1:-1]
    assert raw.count(old) == 1
    raw = raw.replace(old, new)   # byte-for-byte the dense file except the regex
    assert json.loads(raw)["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] == QWEN35_REGEX
    with open(os.path.join(OUT_DIR, "tokenizer.json"), "w", encoding="utf-8") as f:
        f.write(raw)
    shutil.copyfile(os.path.join(DENSE_DIR, "tokenizer_config.json"),
                    os.path.join(OUT_DIR, "tokenizer_config.json"))


@torch.no_grad()
def eval_reference(model_dir, windows):
    """Mean next-token loss of the exported folder through reference.qwen35 (sequential GDN),
    on the windows of tools/demo/evaluate.py (48 evenly spread 256-token windows per stream)."""
    _, model = load_hf_folder(model_dir, torch.float32)
    streams = corpus.token_streams(DENSE_DIR)   # same ids as this folder's tokenizer
    res = {}
    for name in ("train", "heldout", "chat_train", "chat_heldout"):
        s = torch.from_numpy(streams[name].astype("int64"))
        stride = (len(s) - SEQ - 1) // windows
        tot = 0.0
        for i in range(windows):
            w = s[i * stride:i * stride + SEQ + 1]
            tot += float(F.cross_entropy(model(w[:-1]), w[1:], reduction="sum"))
        res[name] = round(tot / (windows * SEQ), 4)
        print(f"{name:13s} loss {res[name]:.3f} nats/token (ppl {math.exp(res[name]):.1f})",
              flush=True)
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=1500)
    ap.add_argument("--time-budget", type=float, default=0,
                    help="seconds of this run: stop early (checkpoint + export) when reached")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--min-lr-frac", type=float, default=0.1)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--wd", type=float, default=0.1)
    ap.add_argument("--chat-frac", type=float, default=0.35)
    ap.add_argument("--eval-every", type=int, default=100)
    ap.add_argument("--ckpt-every", type=int, default=50)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--eval-windows", type=int, default=48)
    ap.add_argument("--bench", type=int, default=0, help="time N steps and exit")
    ap.add_argument("--fp32", action="store_true", help="no bf16 autocast")
    ap.add_argument("--export-only", action="store_true")
    ap.add_argument("--eval-only", action="store_true")
    ap.add_argument("--fresh", action="store_true", help="ignore an existing checkpoint")
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    if args.eval_only:
        eval_reference(OUT_DIR, args.eval_windows)
        return

    tok = corpus.Tokenizer(os.path.join(DENSE_DIR, "tokenizer.json"))
    n_tok = len(tok.vocab) + len(tok.added)
    cfg_dict = hf_config(tt.padded_vocab(n_tok), tok)
    model = Qwen35Model(Qwen35Config.from_hf(cfg_dict))
    init_weights(model, 0)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"vocab {n_tok} tokens -> {cfg_dict['text_config']['vocab_size']} rows, mask id {n_tok}; "
          f"{model.cfg.layer_types}, {n_params} params ({2 * n_params / 2**20:.2f} MiB bf16)")

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
    write_tokenizer()
    if args.export_only:
        export(model, cfg_dict, tok)
        return

    streams = corpus.token_streams(DENSE_DIR)
    train = tt.Batches(streams, "train", args.chat_frac)
    held = tt.Batches(streams, "heldout", args.chat_frac)
    erng = np.random.default_rng([args.seed, 999])
    eval_sets = {"heldout": [held.get(erng, args.batch) for _ in range(4)],
                 "train": [train.get(erng, args.batch) for _ in range(4)]}

    def save():
        os.makedirs(CACHE, exist_ok=True)
        torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step,
                    "log": log, "args": vars(args)}, CKPT + ".tmp")
        os.replace(CKPT + ".tmp", CKPT)

    t_start, tok_seen = time.time(), 0
    while step < args.steps:
        if args.bench and step == args.bench:
            dt = time.time() - t_start
            print(f"{args.bench} steps in {dt:.1f}s: {args.bench / dt:.3f} steps/s, "
                  f"{args.bench * args.batch * SEQ / dt:.0f} tok/s")
            return
        if args.time_budget and time.time() - t_start > args.time_budget:
            print(f"time budget reached at step {step}", flush=True)
            save()
            break
        batch = train.get(np.random.default_rng([args.seed, step]), args.batch)
        for g in opt.param_groups:
            g["lr"] = tt.lr_at(step, args)
        loss = loss_fn(model, batch, amp=not args.fp32)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        tok_seen += batch.numel()
        if step % 25 == 0:
            print(f"step {step} loss {float(loss):.3f} lr {tt.lr_at(step, args):.2e} "
                  f"{tok_seen / (time.time() - t_start):.0f} tok/s", flush=True)
        if step % args.eval_every == 0 or step == args.steps:
            ev = {k: round(evaluate(model, v), 4) for k, v in eval_sets.items()}
            log.append({"step": step, "train_loss": float(loss), **ev,
                        "elapsed_s": round(time.time() - t_start, 1)})
            print("EVAL", json.dumps(log[-1]), flush=True)
        if step % args.ckpt_every == 0 or step == args.steps:
            save()
    with open(os.path.join(CACHE, "target_log.json"), "w") as f:
        json.dump(log, f, indent=1)
    export(model, cfg_dict, tok)
    res = eval_reference(OUT_DIR, args.eval_windows)
    with open(os.path.join(CACHE, "target_eval.json"), "w") as f:
        json.dump({"step": step, "reference_loss": res, "log": log}, f, indent=1)


if __name__ == "__main__":
    main()
