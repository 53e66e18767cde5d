"""A Qwen3.5 hybrid target (tools/reference/qwen35.py) behind the interface train_draft.py uses
for its frozen target (that of reference/transformer.Transformer plus three fast paths).

  target(ids [N, T], return_hidden)  the reference's own sequential forward, row by row
                                     (what reference/dflash_loop.dflash_generate runs)
  target.batched(ids [N, T], ...)    training passes: demo/qwen35_fast.forward (batched, chunked
                                     Gated DeltaNet; equal up to rounding, checked against the
                                     reference on the first call)
  target.greedy_batch(prompts, n)    distillation: batched greedy with carried state
  target.cached(capacity, layer_ids) held-out acceptance: the reference forward with a carried
                                     State and rollback (.forward(tokens, t0) -> logits, taps)

Taps are the outputs of decoder layers (residual stream after the MLP add, before the final
norm), fmt §5, the same for linear and full layers.
"""
import json
import os
import sys

import torch

TOOLS = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(TOOLS, "demo"))
import qwen35_fast  # noqa: E402
from reference.qwen35 import load_hf_folder  # noqa: E402


def is_qwen35(target_dir):
    with open(os.path.join(target_dir, "config.json")) as f:
        d = json.load(f)
    return d.get("model_type") in ("qwen3_5", "qwen3_5_text") or "text_config" in d


class Qwen35Target:
    def __init__(self, model):
        self.m = model
        self.embed_tokens, self.layers, self.norm = model.embed_tokens, model.layers, model.norm
        self.checked = False

    def output_weight(self):
        return self.m.output_weight()

    def parameters(self):
        return self.m.parameters()

    @torch.no_grad()
    def __call__(self, ids, return_hidden=False):
        outs = [self.m(row, return_hidden=True) for row in torch.as_tensor(ids)]
        logits = torch.stack([o[0] for o in outs])
        if not return_hidden:
            return logits
        return logits, [torch.stack([o[1][i] for o in outs]) for i in range(len(self.layers))]

    @torch.no_grad()
    def batched(self, ids, return_hidden=False):
        logits, hidden = qwen35_fast.forward(self.m, ids, return_hidden=True)
        if not self.checked:  # once: the chunked form against the sequential reference
            ref_l, ref_h = self.m(ids[0], return_hidden=True)
            dl = float((ref_l - logits[0]).abs().max())
            dh = max(float((ref_h[i] - hidden[i][0]).abs().max()) for i in range(len(hidden)))
            print(f"qwen35 target: batched vs reference forward, max |diff| logits {dl:.2e}, "
                  f"taps {dh:.2e}", flush=True)
            if dl > 1e-2 or dh > 1e-2:
                raise RuntimeError("batched qwen35 forward disagrees with the reference")
            self.checked = True
        return (logits, hidden) if return_hidden else logits

    def greedy_batch(self, prompts, n_new, eos_ids=()):
        return qwen35_fast.greedy(self.m, prompts, n_new, eos_ids)

    def cached(self, capacity, layer_ids):
        return CachedQwen35(self.m, layer_ids)


class CachedQwen35:
    """One sequence through the reference with its recurrent state carried. forward(tokens, t0)
    may restart at any t0 between the committed position and the end of the last call: the
    state is re-advanced from the last committed snapshot over the tokens of the last call."""

    def __init__(self, model, layer_ids):
        self.m, self.ids = model, layer_ids
        self.base = model.new_state()       # state after `base.pos` tokens
        self.last = []                      # tokens of the last call, from base.pos

    @torch.no_grad()
    def forward(self, tokens, t0):
        adv = t0 - self.base.pos
        if adv < 0 or adv > len(self.last):
            raise ValueError(f"cannot restart at {t0} (committed {self.base.pos})")
        if adv:
            self.m(torch.tensor(self.last[:adv]), self.base)
        self.last = list(tokens)
        st = self.base.clone()
        logits, hidden = self.m(torch.tensor(self.last), st, return_hidden=True)
        return logits, torch.cat([hidden[i] for i in self.ids], -1)


def load_target(target_dir):
    cfg, model = load_hf_folder(target_dir, torch.float32)
    for p in model.parameters():
        p.requires_grad_(False)
    return cfg, Qwen35Target(model)
