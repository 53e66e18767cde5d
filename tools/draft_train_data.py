#!/usr/bin/python3
"""The data side of tools/train_draft.py: the corpus (demo streams, a module's streams or text
files), the row samplers, the frozen target's taps and greedy predictions (with a KV cache for
generation), the decode loop with caches for held-out acceptance, and the distilled rows."""
import importlib
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

TOOLS = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(TOOLS)
sys.path.insert(0, os.path.join(TOOLS))

from reference import rope as rope_mod  # noqa: E402


# --------------------------------------------------------------------------------------
# Corpus
def demo_corpus_module():
    sys.path.insert(0, os.path.join(TOOLS, "demo"))
    return importlib.import_module("corpus")


def chat_prompt_ends(chat, starts, think_end_id):
    """Each conversation's generation prompt ends right after `</think>` and the `\\n\\n`
    token that follows it (render_chat(prompt) with enable_thinking=False)."""
    ends = []
    bounds = list(starts[1:]) + [len(chat)]
    for s, e in zip(starts, bounds):
        hit = np.nonzero(chat[s:e] == think_end_id)[0]
        ends.append(s + int(hit[0]) + 2 if len(hit) else -1)
    return np.array(ends)


def load_corpus(spec, target_dir, heldout_frac=0.05):
    """-> dict with "train"/"heldout" int arrays (raw streams) and, optionally,
    "chat_<split>" + "chat_<split>_starts" + "chat_<split>_prompt_ends"."""
    if spec == ["demo"]:
        cm = demo_corpus_module()
        streams = dict(cm.token_streams(target_dir))
        tok = cm.Tokenizer(os.path.join(target_dir, "tokenizer.json"))
        think_end = tok.added.get("</think>")
        for split in ("train", "heldout"):
            if "chat_" + split in streams and think_end is not None:
                streams[f"chat_{split}_prompt_ends"] = chat_prompt_ends(
                    streams["chat_" + split], streams[f"chat_{split}_starts"], think_end)
        return streams
    if len(spec) == 1 and ":" in spec[0] and not os.path.exists(spec[0]):
        mod, fn = spec[0].rsplit(":", 1)
        if mod.endswith(".py"):  # a file path
            sys.path.insert(0, os.path.dirname(os.path.abspath(mod)))
            mod = os.path.basename(mod)[:-3]
        else:
            sys.path.insert(0, os.getcwd())
        return dict(getattr(importlib.import_module(mod), fn)(target_dir))
    cm = demo_corpus_module()
    tok = cm.Tokenizer(os.path.join(target_dir, "tokenizer.json"))
    ids = []
    for path in spec:
        with open(path, encoding="utf-8") as f:
            ids.extend(tok.encode(f.read()))
    ids = np.array(ids, dtype=np.int64)
    cut = int(len(ids) * (1 - heldout_frac))
    return {"train": ids[:cut], "heldout": ids[cut:]}


class RowSampler:
    """Rows of T tokens: a fraction from conversation starts, the rest at random offsets."""

    def __init__(self, raw, chat=None, starts=None, chat_frac=0.0, T=256):
        self.raw, self.chat, self.T = raw, chat, T
        self.starts = None if starts is None else starts[starts < len(chat) - T]
        self.chat_frac = chat_frac if self.starts is not None and len(self.starts) else 0.0

    def get(self, rng, n):
        n_chat = int(round(n * self.chat_frac))
        rows = [self.chat[s:s + self.T] for s in rng.choice(self.starts, n_chat)] if n_chat else []
        rows += [self.raw[s:s + self.T] for s in rng.integers(0, len(self.raw) - self.T, n - n_chat)]
        if not rows:
            return torch.zeros(0, self.T, dtype=torch.long)
        return torch.from_numpy(np.stack(rows).astype(np.int64))


class RepeatSampler:
    """Rows that fall into a loop: corpus text, then a snippet of 1..max_len tokens repeated
    to the end of the row (the snippet is the prefix's own tail half the time, like a loop
    starting in running text). Small targets' greedy text loops a lot; labelled with the
    loop (copy_labels), random snippets teach the draft to copy from its context in general
    instead of memorising particular continuations."""

    def __init__(self, raw, T=256, max_len=24, prefix=(8, 128)):
        self.raw, self.T, self.max_len, self.prefix = raw, T, max_len, prefix

    def get(self, rng, n):
        rows = []
        for _ in range(n):
            P = int(rng.integers(self.prefix[0], min(self.prefix[1], self.T // 2) + 1))
            L = int(np.exp(rng.uniform(0, np.log(self.max_len + 1))))  # log-uniform length
            o = int(rng.integers(0, len(self.raw) - P - L))
            pre = self.raw[o:o + P]
            if rng.random() < 0.5:
                snip = pre[P - min(L, P):]
            else:
                q = int(rng.integers(0, len(self.raw) - L))
                snip = self.raw[q:q + L]
            reps = np.tile(snip, (self.T - P) // len(snip) + 1)[:self.T - P]
            rows.append(np.concatenate([pre, reps]))
        if not rows:
            return torch.zeros(0, self.T, dtype=torch.long)
        return torch.from_numpy(np.stack(rows).astype(np.int64))


def copy_labels(rows, preds, logp=None):
    """Loop rows are labelled with the loop itself (in place): the small target copies a
    random snippet only ~40% of the time, but once its own greedy text loops, its next
    token is the loop's, which is what the draft should learn to propose there."""
    preds[:, :-1] = rows[:, 1:]
    if logp is not None:
        onehot = torch.zeros_like(logp[:, :-1]).scatter_(-1, rows[:, 1:, None], 30.0)
        logp[:, :-1] = torch.log_softmax(onehot, -1)


# --------------------------------------------------------------------------------------
# Target side
@torch.no_grad()
def target_rows(target, rows, layer_ids, keep_logits=False):
    """rows [N, T] -> (taps [N, T, k*H], greedy next-token predictions [N, T], and the
    target's log-probabilities [N, T, V] if keep_logits, else None)."""
    logits, hidden = getattr(target, "batched", target)(rows, return_hidden=True)
    logp = torch.log_softmax(logits, -1) if keep_logits else None
    return torch.cat([hidden[i] for i in layer_ids], -1), logits.argmax(-1), logp


@torch.no_grad()
def cached_greedy(target, prompts, n_new, eos_ids=()):
    """Batched greedy continuation with a KV cache (transformer.py recomputes everything).
    prompts: list of id lists of any lengths (left-padded here; pad keys are masked and each
    row's positions start at 0, so the result equals unpadded decoding). Returns id lists of
    the continuations, cut after the first eos."""
    if hasattr(target, "greedy_batch"):  # a qwen35 target (draft_target_qwen35.py)
        return target.greedy_batch(prompts, n_new, eos_ids)
    N, P = len(prompts), max(len(p) for p in prompts)
    pad = torch.tensor([P - len(p) for p in prompts])
    ids = torch.tensor([[0] * (P - len(p)) + list(p) for p in prompts])
    dtype, S = target.embed_tokens.weight.dtype, P + n_new
    cos_t, sin_t = rope_mod.cos_sin(target.inv_freq, target.attention_factor, S, dtype)
    keep = torch.arange(S)[None] >= pad[:, None]  # [N, key slots]: False on padding
    at0 = target.layers[0].self_attn
    # preallocated [N, kv heads, slots, d] caches, written in place (no growing copies)
    cache = [(torch.zeros(N, at0.nkv, S, at0.d, dtype=dtype),
              torch.zeros(N, at0.nkv, S, at0.d, dtype=dtype)) for _ in target.layers]

    def forward(x_ids, t0):
        T, end = x_ids.shape[1], t0 + x_ids.shape[1]
        pos = (torch.arange(t0, end)[None] - pad[:, None]).clamp(min=0)
        cos, sin = cos_t[pos][:, None], sin_t[pos][:, None]
        x = target.embed_tokens(x_ids)
        causal = torch.ones(T, end, dtype=torch.bool).tril(t0)
        # pad queries see themselves so their rows stay finite (0 * NaN would leak)
        own = torch.zeros(T, end, dtype=torch.bool)
        own[:, t0:] = torch.eye(T, dtype=torch.bool)
        mask = (causal[None] & (keep[:, None, :end] | own[None]))[:, None, None]
        for layer, (kc, vc) in zip(target.layers, cache):
            at, h = layer.self_attn, layer.input_layernorm(x)
            q = at.q_proj(h).view(N, T, at.nh, at.d)
            k = at.k_proj(h).view(N, T, at.nkv, at.d)
            v = at.v_proj(h).view(N, T, at.nkv, at.d)
            if hasattr(at, "q_norm"):
                q, k = at.q_norm(q), at.k_norm(k)
            q, k, v = (t.transpose(1, 2) for t in (q, k, v))
            q, k = rope_mod.apply_rope(q, cos, sin), rope_mod.apply_rope(k, cos, sin)
            kc[:, :, t0:end], vc[:, :, t0:end] = k, v
            rep = at.nh // at.nkv  # GQA without copying K/V: [N, kv, rep, T, d]
            qg = q.view(N, at.nkv, rep, T, at.d)
            sc = (qg @ kc[:, :, None, :end].transpose(-1, -2)) * (at.d ** -0.5)
            p = torch.softmax(sc.masked_fill(~mask, float("-inf")), -1)
            o = (p @ vc[:, :, None, :end]).view(N, at.nh, T, at.d)
            x = x + at.o_proj(o.transpose(1, 2).reshape(N, T, at.nh * at.d))
            x = x + layer.mlp(layer.post_attention_layernorm(x))
        return F.linear(target.norm(x[:, -1]), target.output_weight())

    nxt = forward(ids, 0).argmax(-1)
    out = [nxt]
    for i in range(1, n_new):
        nxt = forward(nxt[:, None], P + i - 1).argmax(-1)
        out.append(nxt)
    gen = torch.stack(out, 1).tolist()
    res = []
    for g in gen:
        cut = next((i + 1 for i, t in enumerate(g) if t in eos_ids), len(g))
        res.append(g[:cut])
    return res


class CachedTarget:
    """One sequence through the target with a KV cache that can be rolled back: the same
    computation as transformer.py, incrementally (for fast held-out acceptance runs)."""

    def __init__(self, target, capacity, layer_ids):
        self.t, self.ids = target, layer_ids
        at = target.layers[0].self_attn
        dt = target.embed_tokens.weight.dtype
        self.cos, self.sin = rope_mod.cos_sin(target.inv_freq, target.attention_factor, capacity, dt)
        self.kv = [(torch.zeros(at.nkv, capacity, at.d, dtype=dt),
                    torch.zeros(at.nkv, capacity, at.d, dtype=dt)) for _ in target.layers]

    @torch.no_grad()
    def forward(self, tokens, t0):
        """tokens at positions t0.. (cache rows >= t0 are overwritten) -> (logits [T, V],
        taps [T, k*H])."""
        t = self.t
        T, end = len(tokens), t0 + len(tokens)
        x = t.embed_tokens(torch.tensor(tokens))[None]
        cos, sin = self.cos[t0:end], self.sin[t0:end]
        mask = torch.ones(T, end, dtype=torch.bool).tril(t0)
        hidden = []
        for layer, (kc, vc) in zip(t.layers, self.kv):
            at, h = layer.self_attn, layer.input_layernorm(x)
            q = at.q_proj(h).view(1, T, at.nh, at.d)
            k = at.k_proj(h).view(1, T, at.nkv, at.d)
            v = at.v_proj(h).view(1, T, at.nkv, at.d)
            if hasattr(at, "q_norm"):
                q, k = at.q_norm(q), at.k_norm(k)
            q, k, v = (z.transpose(1, 2)[0] for z in (q, k, v))  # [heads, T, d]
            q, k = rope_mod.apply_rope(q, cos, sin), rope_mod.apply_rope(k, cos, sin)
            kc[:, t0:end], vc[:, t0:end] = k, v
            rep = at.nh // at.nkv
            kk, vv = kc[:, :end].repeat_interleave(rep, 0), vc[:, :end].repeat_interleave(rep, 0)
            sc = (q @ kk.transpose(-1, -2)) * (at.d ** -0.5)
            pr = torch.softmax(sc.masked_fill(~mask, float("-inf")), -1)
            x = x + at.o_proj((pr @ vv).transpose(0, 1).reshape(1, T, at.nh * at.d))
            x = x + layer.mlp(layer.post_attention_layernorm(x))
            hidden.append(x[0])
        logits = F.linear(t.norm(x[0]), t.output_weight())
        return logits, torch.cat([hidden[i] for i in self.ids], -1)


def is_v2(draft):
    return hasattr(draft, "candidate_selector")


@torch.no_grad()
def fast_dflash_generate(target, draft, prompt, max_tokens, B, eos_ids=()):
    """The loop of reference/dflash_loop.dflash_generate with KV caches (target) and
    incrementally projected context rows (draft); same steps, same bookkeeping. Its output
    is checked against the reference loop on some prompts wherever it is used."""
    ct = getattr(target, "cached", lambda *a: CachedTarget(target, *a))(
        len(prompt) + max_tokens + B + 1, draft.cfg.target_layer_ids)
    embed, head = target.embed_tokens.weight, target.output_weight()
    logits, feats = ct.forward(list(prompt), 0)
    ctx = draft.context(feats)
    seq, out, accept = list(prompt), [], []

    def emit(tokens):
        for tk in tokens:
            out.append(tk)
            seq.append(tk)
            if tk in eos_ids or len(out) >= max_tokens:
                return False
        return True

    going = max_tokens > 0 and emit([int(torch.argmax(logits[-1]))])
    while going:
        start = len(seq) - 1
        toks = torch.tensor(draft.block_tokens(seq[-1], B))
        x = F.embedding(toks, embed)[None]
        h = draft.hidden(ctx[None], torch.arange(start)[None], x, torch.arange(start, start + B)[None])
        if is_v2(draft):  # DFlash2: the candidate selector's greedy walk over the top-k
            hb = h[0, 1:]
            block = [seq[-1]] + draft.walk(seq[-1], hb, draft.logits_of(hb, head))[0]
        else:
            block = [seq[-1]] + [int(v) for v in torch.argmax(F.linear(h[0, 1:], head), -1)]
        logits, feats = ct.forward(block, start)
        post = [int(v) for v in torch.argmax(logits, -1)]
        a = 0
        while a < B - 1 and block[a + 1] == post[a]:
            a += 1
        accept.append(a)
        ctx = torch.cat([ctx, draft.context(feats[:a + 1])], 0)
        going = emit(block[1:a + 1] + [post[a]])
    return {"ids": out, "accept_lens": accept}


def prompt_pool(streams, split, rng, n, raw_len=(32, 128)):
    """Corpus prompts: chat generation prompts when there are any (half), else raw windows."""
    out = []
    ends = streams.get(f"chat_{split}_prompt_ends")
    n_chat = n // 2 if ends is not None else 0
    if n_chat:
        starts = streams[f"chat_{split}_starts"]
        ok = np.nonzero(ends > 0)[0]
        for i in rng.choice(ok, n_chat, replace=len(ok) < n_chat):
            out.append(streams["chat_" + split][starts[i]:ends[i]].tolist())
    raw = streams[split]
    for _ in range(n - n_chat):
        L = int(rng.integers(raw_len[0], raw_len[1] + 1))
        s = int(rng.integers(0, len(raw) - L))
        out.append(raw[s:s + L].tolist())
    return out


def distill_stream(target, streams, n_seqs, n_new, eos_ids, seed, batch=64, split="train"):
    """Concatenated [prompt + greedy continuation] sequences with their start offsets."""
    rng = np.random.default_rng([seed, 7])
    prompts = prompt_pool(streams, split, rng, n_seqs)
    prompts.sort(key=len)  # similar lengths per batch: less padding
    ids, starts = [], []
    for i in range(0, len(prompts), batch):
        group = prompts[i:i + batch]
        for p, g in zip(group, cached_greedy(target, group, n_new, eos_ids)):
            starts.append(len(ids))
            ids.extend(p + g)
    return np.array(ids, dtype=np.int64), np.array(starts, dtype=np.int64)
