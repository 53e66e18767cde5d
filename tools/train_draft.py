#!/usr/bin/python3
"""Train a DFlash draft for a frozen target on a token corpus; write it in z-lab's format.

  nice -n 10 /usr/bin/python3 tools/train_draft.py --target models/demo/target \
      --corpus demo --out models/demo/draft --layers 2 --block-size 8 --time-budget 2400
  /usr/bin/python3 tools/train_draft.py --target T --corpus demo --out D --eval-only

What the draft learns (z-lab released no training code; this follows the paper's setup):
  - the frozen target runs over a corpus row of T tokens, giving its tapped hidden states and
    its greedy prediction at every position;
  - nb random block starts s per row: the draft's context is the taps of positions 0..s-1,
    its block [token s, MASK x (B-1)] at positions s..s+B-1, exactly as in decoding;
  - labels for block row j = the target's argmax after positions ..s+j-1 (what acceptance
    compares against), or the corpus tokens with --labels corpus;
  - cross-entropy over the B-1 masked rows, plus --kd times the cross-entropy against the
    target's whole distribution there, weighted exp(-(j-1)/decay) per row since a miss at
    row j makes every later row worthless.
  - draft layers start as copies of the target's last layers when the shapes match.
A Qwen3.5 hybrid target (config model_type qwen3_5 / qwen3_5_text) is detected and run through
tools/reference/qwen35.py (tools/draft_target_qwen35.py); its layers never match a draft layer,
so start such a draft with --init-from (e.g. a draft of a dense target of the same width) or
--init random.
All nb blocks of a row run in one forward: block b's rows see context rows < s_b and their
own block only (attention mask), so one target pass serves nb training blocks.
--distill F: a fraction F of rows comes from the target's own greedy continuations of corpus
prompts (generated once, with a KV cache): there the teacher-forced argmax equals the
continuation, so labels are exactly what the decode loop verifies against.

Corpus: `demo` (tools/demo/corpus.py token streams and chat prompts), `module:function` or
`path/file.py:function` (called with the target dir, returning a dict like
corpus.token_streams), or text files (encoded with the target's tokenizer.json; the last 5%
of tokens held out).
Held-out acceptance: the decode loop of tools/reference/dflash_loop.py on held-out prompts
(half chat generation prompts, half raw source prefixes), run with KV caches for speed and
checked against the reference loop itself on the first prompts; reported as tau = mean
accepted+1 per step at block sizes 4, 8, 16.
"""
import argparse
import json
import math
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

TOOLS = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(TOOLS)
sys.path.insert(0, TOOLS)
from reference.dflash_draft import DFlashDraft, load_draft, save_draft  # noqa: E402
from reference.dflash2_draft import (DFlash2Draft, Draft2Config, load_draft2,  # noqa: E402
                                     save_draft2)
from reference.dflash_loop import dflash_generate, tau  # noqa: E402
from reference.transformer import load_hf_folder  # noqa: E402
from make_draft import draft_config  # noqa: E402
from draft_target_qwen35 import is_qwen35, load_target as load_qwen35_target  # noqa: E402

from draft_train_data import (load_corpus, RowSampler, RepeatSampler, copy_labels, target_rows, is_v2,  # noqa: E402
                              fast_dflash_generate, prompt_pool, distill_stream)

# --------------------------------------------------------------------------------------
# Draft side
def init_from_target(draft, target):
    """Copy the target's last L decoder layers into the draft when the shapes match (the
    draft layers then start as a working transformer); fc starts as 'average of the taps'."""
    tl, dl = target.layers, draft.layers
    sd_t = [l.state_dict() for l in tl[len(tl) - len(dl):]]
    copied = 0
    with torch.no_grad():
        for layer, src in zip(dl, sd_t):
            # DFlash2 layers: the v1 part only (the convolutions have no target counterpart)
            own = {k: v for k, v in layer.state_dict().items() if "_conv." not in k}
            if all(k in src and src[k].shape == v.shape for k, v in own.items()):
                layer.load_state_dict({k: src[k].to(v.dtype) for k, v in own.items()},
                                      strict=False)
                copied += 1
        H, k = draft.cfg.hidden_size, len(draft.cfg.target_layer_ids)
        eye = torch.eye(H) / k
        draft.fc.weight.copy_(torch.cat([eye] * k, 1) + 0.02 * torch.randn(H, k * H) / math.sqrt(H))
    return copied


V2_PREFIXES = ("candidate_selector.",)


def is_v2_param(name):
    return name.startswith(V2_PREFIXES) or "_conv." in name


@torch.no_grad()
def init_v2_parts(draft, seed, codebook_std=0.1):
    """The DFlash2 additions start neutral: convolutions = identity (base tap 0 = 1, other
    taps and the dynamic projection 0), so the layers compute what the v1 layers compute;
    the selector's codebooks small and random (all-zero codebooks would be a saddle with
    zero gradient), so its edge scores start near 0 and the walk near the argmax."""
    g = torch.Generator().manual_seed(seed + 2000)
    for name, p in draft.named_parameters():
        if name.endswith("base_kernel"):
            p.zero_()
            p[:, 0] = 1.0
        elif name.endswith("kernel_projection.weight"):
            p.zero_()
        elif name.endswith("_codebook"):
            p.copy_(codebook_std * torch.randn(p.shape, generator=g))
        elif name == "candidate_selector.hidden_projection.weight":
            p.copy_(torch.randn(p.shape, generator=g) / math.sqrt(p.shape[1]))


def init_from_draft(draft, src_dir, n_target_layers):
    """Copy every tensor of the draft folder src_dir (v1 or v2) whose name and shape match;
    returns the names copied."""
    with open(os.path.join(src_dir, "config.json")) as f:
        v2 = "DFlash2DraftModel" in (json.load(f).get("architectures") or [])
    _, src = (load_draft2 if v2 else load_draft)(src_dir, n_target_layers)
    sd, own = src.state_dict(), draft.state_dict()
    take = {k: sd[k].to(v.dtype) for k, v in own.items() if k in sd and sd[k].shape == v.shape}
    draft.load_state_dict(take, strict=False)
    return sorted(take)


def block_valid(nb, B, K):
    """bool [nb*B, K]: row t - tap is in t's own block (BlockConv.apply's `valid`)."""
    j = torch.arange(nb * B) % B
    return j[:, None] - torch.arange(K)[None, :] >= 0


def selector_scores(draft, h, logits, prev, k):
    """Candidates [.., k] (top-k of the logits, no gradient through the choice) and their
    scores logit + edge(prev, hidden_projection(h), cand), as the walk computes them."""
    cs = draft.candidate_selector
    cand = torch.topk(logits.detach(), k, -1).indices
    hp = cs.hidden_projection(h)
    edge = cs.edge(prev, hp.float(), cand)
    return cand, logits.gather(-1, cand) + edge


def block_batch(rows, preds, starts, B, mask_id, labels="target"):
    """Block tokens, positions, attention mask and labels for starts [N, nb].
    Returns tokens [N, nb*B], positions [N, nb*B], mask [N, nb*B, T + nb*B], labels
    [N, nb, B-1]."""
    N, T = rows.shape
    nb = starts.shape[1]
    offs = torch.arange(B)
    pos = starts[:, :, None] + offs  # [N, nb, B]
    toks = torch.full((N, nb, B), mask_id, dtype=torch.long)
    toks[:, :, 0] = rows.gather(1, starts)
    src = preds if labels == "target" else rows
    shift = 1 if labels == "target" else 0  # pred[t] is the target's token for t+1
    lab = src.gather(1, (pos[:, :, 1:] - shift).reshape(N, -1)).view(N, nb, B - 1)
    ctx_ok = torch.arange(T)[None, None, :] < starts.repeat_interleave(B, 1)[:, :, None]
    blk = torch.arange(nb).repeat_interleave(B)
    own = (blk[:, None] == blk[None, :]).expand(N, -1, -1)
    return toks.view(N, -1), pos.view(N, -1), torch.cat([ctx_ok, own], 2), lab


def draft_loss(draft, target, taps, rows, preds, starts, B, weights, labels, amp, logp=None,
               kd=0.0, sel_weight=1.0):
    """Weighted cross-entropy on the hard labels, plus kd * cross-entropy against the
    target's own distribution at the same positions (soft labels carry more signal per
    block than the argmax alone). Returns (loss, mean accepted length, per-row hit rate)."""
    toks, pos, mask, lab = block_batch(rows, preds, starts, B, draft.cfg.mask_token_id, labels)
    N, T = rows.shape
    nb = starts.shape[1]
    v2 = is_v2(draft)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
        ctx = draft.context(taps)
        x = F.embedding(toks, target.embed_tokens.weight)
        if v2:
            valid = block_valid(nb, B, draft.cfg2.conv_kernel_size).expand(N, -1, -1)
            h = draft.hidden(ctx, torch.arange(T).expand(N, -1), x, pos, mask, valid)
        else:
            h = draft.hidden(ctx, torch.arange(T).expand(N, -1), x, pos, mask)
        h = h.view(N, nb, B, -1)[:, :, 1:]
        logits = draft.logits_of(h, target.output_weight()) if v2 else F.linear(h, target.output_weight())
    logits = logits.float()
    ce = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), lab.reshape(-1), reduction="none")
    ce = ce.view(N, nb, B - 1)
    if kd and logp is not None:
        idx = (pos.view(N, nb, B)[:, :, 1:] - 1).reshape(N, -1)  # logp[t] is about token t+1
        pt = logp.gather(1, idx[..., None].expand(-1, -1, logp.shape[-1])).exp()
        soft = -(pt.view(N, nb, B - 1, -1) * torch.log_softmax(logits, -1)).sum(-1)
        ce = ce + kd * soft
    loss = (ce * weights).sum(-1).mean() / weights.sum()
    hit = (logits.argmax(-1) == lab)
    if v2:
        # Selector: the walk picks row j's token among the top-k by logit + edge score with
        # the token picked for row j-1. Acceptance only goes on while every earlier pick was
        # the label, so the previous token is the label of row j-1 (the anchor for row 1):
        # cross-entropy over the k candidates towards the label, where it is among them.
        # With that prev, a hit of the selector's argmax on rows 1..j is exactly the walk
        # accepting j tokens, so `acc` below is the DFlash2 accepted length.
        prev = torch.cat([toks.view(N, nb, B)[:, :, :1], lab[:, :, :-1]], -1)
        cand, score = selector_scores(draft, h.float(), logits, prev, draft.cfg2.selector_top_k)
        inside = cand == lab[..., None]
        has = inside.any(-1)
        sce = F.cross_entropy(score.reshape(-1, score.shape[-1]), inside.long().argmax(-1).reshape(-1),
                              reduction="none").view(N, nb, B - 1) * has
        loss = loss + sel_weight * (sce * weights).sum(-1).mean() / weights.sum()
        hit = cand.gather(-1, score.argmax(-1, keepdim=True))[..., 0] == lab
    # accepted length if the labels are what the target verifies: leading run of hits
    acc = hit.long().cumprod(-1).sum(-1).double().mean()
    return loss, float(acc), hit.double().mean(0).mean(0)


def sample_starts(rng, N, T, B, nb):
    """nb distinct block starts per row in [1, T-B] (>= 1 context row; labels in range)."""
    hi = T - B  # corpus labels read rows[s + B - 1]
    return torch.from_numpy(np.stack([np.sort(rng.choice(np.arange(1, hi + 1), nb, replace=False))
                                      for _ in range(N)]).astype(np.int64))


# --------------------------------------------------------------------------------------
def heldout_tau(target, draft, prompts, n_tokens, block_sizes, eos_ids, n_check=2, accs=None):
    """{B: tau} over the prompts (all steps pooled), run with fast_dflash_generate; on the
    first n_check prompts per block size the reference loop must give the same ids and
    accept_lens (else this raises). accs: a dict that receives {B: accept_lens}."""
    res = {}
    draft.eval()
    for B in block_sizes:
        acc = []
        for i, p in enumerate(prompts):
            r = fast_dflash_generate(target, draft, p, n_tokens, B, eos_ids)
            if i < n_check:
                ref = dflash_generate(target, draft, p, n_tokens, B, eos_ids)
                if (ref["ids"], ref["accept_lens"]) != (r["ids"], r["accept_lens"]):
                    raise RuntimeError(f"fast loop != reference loop on held-out prompt {i}, B={B}")
            acc += r["accept_lens"]
        res[B] = round(tau(acc), 3)
        if accs is not None:
            accs[B] = acc
    draft.train()
    return res


def evaluate_saved(a, target, streams, eos_ids, n_target_layers):
    """Held-out tau of the draft folder a.out (bf16-rounded weights, as an engine loads it),
    separately for chat generation prompts and raw source prefixes, and pooled."""
    with open(os.path.join(a.out, "config.json")) as f:
        v2 = "DFlash2DraftModel" in (json.load(f).get("architectures") or [])
    _, saved = (load_draft2 if v2 else load_draft)(a.out, n_target_layers)
    prompts = prompt_pool(streams, "heldout", np.random.default_rng([a.seed, 99]), a.eval_prompts)
    n_chat = a.eval_prompts // 2 if streams.get("chat_heldout_prompt_ends") is not None else 0
    blocks = [int(x) for x in a.eval_blocks.split(",") if x]
    t0 = time.time()
    if n_chat:  # "all" pools the steps of both halves (the same as running all prompts)
        ac, ar = {}, {}
        res = {"chat": heldout_tau(target, saved, prompts[:n_chat], a.eval_tokens, blocks, eos_ids,
                                   1, ac),
               "raw": heldout_tau(target, saved, prompts[n_chat:], a.eval_tokens, blocks, eos_ids,
                                  1, ar)}
        res["all"] = {B: round(tau(ac[B] + ar[B]), 3) for B in blocks}
    else:
        res = {"all": heldout_tau(target, saved, prompts, a.eval_tokens, blocks, eos_ids)}
    res.update(prompts=len(prompts), chat_prompts=n_chat, max_tokens=a.eval_tokens,
               eval_s=round(time.time() - t0))
    print("TAU", json.dumps(res), flush=True)
    return res


def main():
    ap = argparse.ArgumentParser(description="Train a DFlash draft (see the module docstring).")
    ap.add_argument("--target", required=True)
    ap.add_argument("--corpus", nargs="+", default=["demo"])
    ap.add_argument("--out", required=True)
    ap.add_argument("--layers", type=int, default=1)
    ap.add_argument("--block-size", type=int, default=8)
    ap.add_argument("--target-layer-ids", help="comma-separated (default: the formula)")
    ap.add_argument("--heads", type=int)
    ap.add_argument("--kv-heads", type=int)
    ap.add_argument("--head-dim", type=int)
    ap.add_argument("--ffn", type=int)
    ap.add_argument("--mask-token-id", type=int)
    ap.add_argument("--init", choices=["target", "random"], default="target")
    ap.add_argument("--arch", choices=["dflash", "dflash2"], default="dflash",
                    help="dflash2: DFlash2DraftModel (block convolutions + candidate selector)")
    ap.add_argument("--init-from", help="draft folder (v1 or v2) whose matching tensors start "
                    "the draft; its config sets the v1 shape (layers, taps, mask, heads...)")
    ap.add_argument("--base-lr", type=float, help="peak lr of the tensors taken from --init-from "
                    "(default --lr); the new ones use --lr")
    ap.add_argument("--conv-kernel", type=int, default=2)
    ap.add_argument("--conv-group", type=int, default=16)
    ap.add_argument("--selector-rank", type=int, default=64)
    ap.add_argument("--top-k", type=int, default=16)
    ap.add_argument("--sel-weight", type=float, default=1.0, help="weight of the selector's loss")
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--time-budget", type=float, default=0, help="seconds; also ends training")
    ap.add_argument("--batch", type=int, default=8, help="rows per step")
    ap.add_argument("--seq", type=int, default=256, help="tokens per row")
    ap.add_argument("--blocks", type=int, default=24, help="block starts per row")
    ap.add_argument("--reuse", type=int, default=2, help="draft steps per target pass (new block starts each)")
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--warmup", type=int, default=50)
    ap.add_argument("--wd", type=float, default=0.01)
    ap.add_argument("--decay", type=float, default=0, help="position weight exp(-(j-1)/decay); 0 = B-1")
    ap.add_argument("--labels", choices=["target", "corpus"], default="target")
    ap.add_argument("--kd", type=float, default=1.0, help="weight of the soft-label (target distribution) term")
    ap.add_argument("--chat-frac", type=float, default=0.35)
    ap.add_argument("--distill", type=float, default=0.5, help="fraction of rows from target greedy text")
    ap.add_argument("--repeat", type=float, default=0.0, help="fraction of rows that loop (RepeatSampler)")
    ap.add_argument("--distill-seqs", type=int, default=1024)
    ap.add_argument("--distill-new", type=int, default=256)
    ap.add_argument("--no-amp", action="store_true", help="fp32 draft training (default bf16 autocast)")
    ap.add_argument("--dtype", choices=["bf16", "f32"], default="bf16")
    ap.add_argument("--eval-prompts", type=int, default=16, help="half chat, half raw; 0: none")
    ap.add_argument("--eval-only", action="store_true", help="only measure the tau of --out")
    ap.add_argument("--eval-tokens", type=int, default=96)
    ap.add_argument("--eval-blocks", default="4,8,16")
    ap.add_argument("--log-every", type=int, default=25)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(a.seed)
    t_start = time.time()

    if is_qwen35(a.target):  # Qwen3.5 hybrid: reference/qwen35.py behind the same interface
        tcfg, target = load_qwen35_target(a.target)
    else:
        tcfg, target = load_hf_folder(a.target, torch.float32)
    for p in target.parameters():
        p.requires_grad_(False)
    with open(os.path.join(a.target, "config.json")) as f:
        tjson = json.load(f)
    eos = tjson.get("eos_token_id", tjson.get("text_config", {}).get("eos_token_id"))
    eos_ids = set(eos if isinstance(eos, list) else [eos] if eos is not None else [])
    gpath = os.path.join(a.target, "generation_config.json")
    if os.path.exists(gpath):
        with open(gpath) as f:
            ge = json.load(f).get("eos_token_id")
        eos_ids |= set(ge if isinstance(ge, list) else [ge] if ge is not None else [])

    ids = [int(x) for x in a.target_layer_ids.split(",")] if a.target_layer_ids else None
    # shapes default to the target's, so that its layers can initialise the draft's
    heads = a.heads or tcfg.num_attention_heads
    kv = a.kv_heads or (tcfg.num_key_value_heads if heads == tcfg.num_attention_heads else heads)
    if a.init_from:  # the v1 shape is the source draft's
        with open(os.path.join(a.init_from, "config.json")) as f:
            src = json.load(f)
        v1 = dict(src, architectures=["DFlashDraftModel"])
        v1.pop("layer_types", None)
        from reference.dflash_draft import DraftConfig
        cfg = DraftConfig.from_hf(v1, tcfg.num_hidden_layers)
        cfg.block_size = a.block_size
    else:
        cfg = draft_config(tcfg, a.layers, a.block_size, ids, heads, kv, a.head_dim or tcfg.head_dim,
                           a.ffn or tcfg.intermediate_size, a.mask_token_id, tcfg.rope_theta, a.target)
    if a.arch == "dflash2":
        cfg2 = Draft2Config(base=cfg, conv_kernel_size=a.conv_kernel, conv_group_size=a.conv_group,
                            selector_rank=a.selector_rank, selector_top_k=a.top_k)
        draft = DFlash2Draft(cfg2)
        init_v2_parts(draft, a.seed)
    else:
        draft = DFlashDraft(cfg)
    reused = set()
    if a.init_from:
        reused = set(init_from_draft(draft, a.init_from, tcfg.num_hidden_layers))
        how = f"{len(reused)} tensors from {a.init_from}"
    else:
        how = f"{init_from_target(draft, target) if a.init == 'target' else 0} layers copied from the target"
    n_params = sum(p.numel() for p in draft.parameters())
    print(f"draft ({a.arch}): {cfg.num_hidden_layers} layers, taps {cfg.target_layer_ids}, mask "
          f"{cfg.mask_token_id}, {n_params} params ({2 * n_params / 2**20:.2f} MiB bf16), "
          f"{how}", flush=True)

    streams = load_corpus(a.corpus, a.target)
    if a.eval_only:
        evaluate_saved(a, target, streams, eos_ids, tcfg.num_hidden_layers)
        return
    B, T = a.block_size, a.seq
    train = RowSampler(streams["train"], streams.get("chat_train"), streams.get("chat_train_starts"),
                       a.chat_frac, T)
    repeats = RepeatSampler(streams["train"], T)
    distilled = None
    if a.distill > 0:
        t0 = time.time()
        d_ids, d_starts = distill_stream(target, streams, a.distill_seqs, a.distill_new, eos_ids, a.seed)
        distilled = RowSampler(d_ids, d_ids, d_starts, 1.0, T)
        print(f"distilled {len(d_starts)} greedy continuations, {len(d_ids)} tokens "
              f"({time.time() - t0:.0f}s)", flush=True)

    erng = np.random.default_rng([a.seed, 99])
    if distilled:  # monitor on what acceptance is measured on: greedy text of held-out prompts
        h_ids, h_starts = distill_stream(target, streams, 2 * a.batch, a.distill_new, eos_ids,
                                         a.seed + 1, split="heldout")
        held = RowSampler(h_ids, h_ids, h_starts, 1.0, T)
    else:
        held = RowSampler(streams["heldout"], streams.get("chat_heldout"),
                          streams.get("chat_heldout_starts"), a.chat_frac, T)
    held_rows = [held.get(erng, a.batch) for _ in range(2)]

    decay = a.decay or (B - 1)
    weights = torch.exp(-torch.arange(B - 1, dtype=torch.float32) / decay)
    groups = []
    for old in (False, True):  # new tensors at --lr, those from --init-from at --base-lr
        named = [(n, p) for n, p in draft.named_parameters() if (n in reused) == old]
        mult = (a.base_lr or a.lr) / a.lr if old else 1.0
        groups += [{"params": [p for n, p in named if p.dim() == 2], "weight_decay": a.wd, "mult": mult},
                   {"params": [p for n, p in named if p.dim() != 2], "weight_decay": 0.0, "mult": mult}]
    opt = torch.optim.AdamW([g for g in groups if g["params"]], lr=a.lr, betas=(0.9, 0.95))
    amp = not a.no_amp
    log, step = [], 0

    def progress():
        p = step / a.steps
        if a.time_budget:
            p = max(p, (time.time() - t_start) / a.time_budget)
        return p

    def evaluate():
        draft.eval()
        with torch.no_grad():
            out = []
            for rows in held_rows:
                taps, preds, _ = target_rows(target, rows, cfg.target_layer_ids)
                st = sample_starts(np.random.default_rng(5), rows.shape[0], T, B, a.blocks)
                out.append(draft_loss(draft, target, taps, rows, preds, st, B, weights, a.labels, amp)[:2])
        draft.train()
        return sum(o[0].item() for o in out) / len(out), sum(o[1] for o in out) / len(out)

    draft.train()
    while progress() < 1:
        rng = np.random.default_rng([a.seed, step])
        if step % a.reuse == 0:  # the target pass costs as much as a draft step: reuse it
            n_d = int(round(a.batch * a.distill)) if distilled else 0
            n_r = int(round(a.batch * a.repeat))
            rows = [repeats.get(rng, n_r), train.get(rng, a.batch - n_d - n_r)]
            if n_d:
                rows.append(distilled.get(rng, n_d))
            rows = torch.cat(rows)
            taps, preds, logp = target_rows(target, rows, cfg.target_layer_ids, a.kd > 0)
            if n_r:
                copy_labels(rows[:n_r], preds[:n_r], None if logp is None else logp[:n_r])
        starts = sample_starts(rng, rows.shape[0], T, B, a.blocks)
        pr = progress()
        lr = a.lr * min(1.0, (step + 1) / a.warmup) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(pr, 1))))
        for g in opt.param_groups:
            g["lr"] = lr * g["mult"]
        loss, acc, _ = draft_loss(draft, target, taps, rows, preds, starts, B, weights, a.labels,
                                  amp, logp, a.kd, a.sel_weight)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(draft.parameters(), 1.0)
        opt.step()
        step += 1
        if step % a.log_every == 0:
            hl, hacc = evaluate()
            # loss: the training objective (hard + kd soft CE); heldout_loss: hard CE only
            rec = {"step": step, "loss": round(float(loss), 4), "train_acc_len": round(acc, 3),
                   "heldout_loss": round(hl, 4), "heldout_acc_len": round(hacc, 3),
                   "lr": float(f"{lr:.3g}"), "elapsed_s": round(time.time() - t_start)}
            log.append(rec)
            print(json.dumps(rec), flush=True)
    train_s = round(time.time() - t_start)
    print(f"trained {step} steps in {train_s}s", flush=True)
    if is_v2(draft):
        save_draft2(a.out, draft, dtype=a.dtype)
    else:
        save_draft(a.out, draft, dtype=a.dtype, write_ids=True)
    summary = {"steps": step, "train_s": train_s, "last": log[-1] if log else None,
               "args": vars(a)}
    with open(os.path.join(a.out, "training_log.json"), "w") as f:
        json.dump({"summary": summary, "log": log}, f, indent=1)
    if a.eval_prompts:
        summary["heldout_tau"] = evaluate_saved(a, target, streams, eos_ids, tcfg.num_hidden_layers)
        with open(os.path.join(a.out, "training_log.json"), "w") as f:
            json.dump({"summary": summary, "log": log}, f, indent=1)
    print(json.dumps({k: v for k, v in summary.items() if k != "args"}))


if __name__ == "__main__":
    main()
