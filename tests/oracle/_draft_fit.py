"""Fit a random draft to a target's greedy continuation of the test prompts, briefly.

A random draft almost never guesses right (acceptance ~1/vocab), so comparing the engine's
accept_lens with the reference's would only compare lists of zeros. A few dozen steps of
tools/train_draft.py's loss on the very continuation being decoded make the draft right
part of the time: accept_lens then vary between 0 and B-1 and pin down what was drafted."""
import numpy as np
import torch

from draft_train_data import cached_greedy, target_rows  # noqa: E402
from train_draft import draft_loss, sample_starts


def fit_draft(target, draft, prompts, n_new, steps, block_size, seed=0, lr=3e-3, blocks=12):
    torch.manual_seed(seed)
    conts = cached_greedy(target, prompts, n_new)
    T = min(len(p) + len(c) for p, c in zip(prompts, conts))
    rows = torch.tensor([(p + c)[:T] for p, c in zip(prompts, conts)])
    taps, preds, _ = target_rows(target, rows, draft.cfg.target_layer_ids)
    B = block_size
    weights = torch.ones(B - 1)
    opt = torch.optim.Adam(draft.parameters(), lr=lr)
    rng = np.random.default_rng(seed)
    draft.train()
    for _ in range(steps):
        starts = sample_starts(rng, rows.shape[0], T, B, min(blocks, T - B))
        loss, _, _ = draft_loss(draft, target, taps, rows, preds, starts, B, weights, "target", False)
        opt.zero_grad()
        loss.backward()
        opt.step()
    draft.eval()
    return float(loss)
