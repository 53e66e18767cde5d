"""Greedy DFlash decode loop (shared/dflash-format.md) and plain greedy decoding, in PyTorch.

The target is recomputed from scratch on the whole sequence at every step: slow but obviously
right, and the models this runs on are tiny. Everything is argmax with torch's tie rule (the
lowest id), so the loop's output must equal plain greedy token for token.
"""
import torch

from .transformer import Transformer
from .dflash_draft import DFlashDraft


@torch.no_grad()
def target_pass(target: Transformer, ids, layer_ids):
    """Target forward on ids -> (logits [T, V], taps [T, k*H]): the outputs of the decoder
    layers in layer_ids (HF hidden_states[id + 1], before the final norm), concatenated."""
    logits, hidden = target(torch.tensor([list(ids)]), return_hidden=True)
    return logits[0], torch.cat([hidden[i][0] for i in layer_ids], -1)


@torch.no_grad()
def plain_greedy(target: Transformer, prompt, max_tokens, eos_ids=()):
    seq, out = list(prompt), []
    while len(out) < max_tokens:
        t = int(torch.argmax(target(torch.tensor([seq]))[0, -1]))
        out.append(t)
        seq.append(t)
        if t in eos_ids:
            break
    return out


@torch.no_grad()
def dflash_generate(target: Transformer, draft: DFlashDraft, prompt, max_tokens,
                    block_size=None, eos_ids=(), cap_block=False):
    """Returns {"ids": generated ids, "accept_lens": [a per speculative step],
    "block_sizes": [B per step], "drafted": sum(B-1), "accepted": sum(a)}.
    cap_block=False: every step drafts a full block and the last step's emission is cut at
    max_tokens (a is what verification accepted, even when the cut hides some of it).
    cap_block=True: what the engine does: a step never verifies more tokens than may still be
    emitted (B = min(B, tokens left)) and the last token, when one is left, comes from a plain
    target step. Both give the same ids; only the last steps' accept_lens can differ."""
    B = block_size or draft.cfg.block_size
    ids_layers = draft.cfg.target_layer_ids
    embed, head = target.embed_tokens.weight, target.output_weight()
    logits, feats = target_pass(target, prompt, ids_layers)
    seq = list(prompt)
    out, accept, sizes = [], [], []

    def emit(tokens):
        """Append tokens until max_tokens or an eos; False once generation is over."""
        for t in tokens:
            out.append(t)
            seq.append(t)
            if t in eos_ids or len(out) >= max_tokens:
                return False
        return True

    going = max_tokens > 0 and emit([int(torch.argmax(logits[-1]))])
    ctx = feats  # taps of positions 0..len(seq)-2: everything but the last committed token
    while going:
        start = len(seq) - 1  # position of the last committed token = block row 0
        assert ctx.shape[0] == start
        if cap_block:
            B = min(block_size or draft.cfg.block_size, max_tokens - len(out))
            if B <= 1:  # plain step
                logits, feats = target_pass(target, seq, ids_layers)
                ctx = torch.cat([ctx, feats[start:start + 1]], 0)
                going = emit([int(torch.argmax(logits[-1]))])
                continue
        sizes.append(B)
        if hasattr(draft, "propose_tokens"):  # DFlash2: the candidate selector's greedy walk
            block = [seq[-1]] + draft.propose_tokens(ctx, seq[-1], embed, head, B)
        else:
            dl = draft.block_logits(ctx, seq[-1], embed, head, B)
            block = [seq[-1]] + [int(t) for t in torch.argmax(dl, -1)]
        logits, feats = target_pass(target, seq[:-1] + block, ids_layers)
        post = [int(t) for t in torch.argmax(logits[start:start + B], -1)]
        a = 0
        while a < B - 1 and block[a + 1] == post[a]:
            a += 1
        accept.append(a)
        # rows start..start+a hold block[0..a], all committed now; the bonus post[a] is not
        ctx = torch.cat([ctx, feats[start:start + a + 1]], 0)
        going = emit(block[1:a + 1] + [post[a]])
    return {"ids": out, "accept_lens": accept, "block_sizes": sizes,
            "drafted": sum(b - 1 for b in sizes), "accepted": sum(accept)}


def tau(accept_lens):
    """Mean tokens per speculative step (a + 1), the paper's acceptance length."""
    return sum(a + 1 for a in accept_lens) / max(1, len(accept_lens))
