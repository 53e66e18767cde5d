#!/usr/bin/python3
"""dflash graft: the demo pair grown into a small real-looking shape (qwen3-graft-test: hidden
1024, 6 layers, 8/2 heads, head_dim 128, vocab 4096) at f32 computes the small pair's function.

- the grown target's greedy ids equal the small target's, and its logits over the live
  vocabulary agree within 1e-5 (relative to the row's largest logit) at every position;
- padding ids (4032..4095) never win: the argmax over the whole grown vocabulary stays live,
  and the padding logits sit >= 1000 below the live maximum (so even the ~148k padding ids of
  a real vocabulary carry no probability mass at temperature 1);
- the grown DFlash2 draft proposes the same blocks (and nearly the same logits) as the small
  draft, and a speculative run accepts exactly what the small pair accepts.
"""
import json
import os
import tempfile

from graft_common import (argmax, check_grown_pair, draft_logits, f32_tensor, generate, logits, rel_diff,  # noqa: E402
                          run, PROMPTS)
from harness import SRC, check, finish  # noqa: E402

DEMO = os.path.join(SRC, "models", "demo")
SMALL_T, SMALL_D = os.path.join(DEMO, "target"), os.path.join(DEMO, "draft2")
SMALL_D1 = os.path.join(DEMO, "draft")
LIVE_V = 4032


with tempfile.TemporaryDirectory() as tmp:
    grown = os.path.join(tmp, "grown")
    run("graft", "--shape", "qwen3-graft-test", "--out", grown, "--dtype", "f32", "--seed", "7")
    big_t, big_d = os.path.join(grown, "target"), os.path.join(grown, "draft")
    meta = json.load(open(os.path.join(grown, "graft.json")))
    check("graft.json names the sources and the shape",
          meta["shape"] == "qwen3-graft-test" and os.path.samefile(meta["source_target"], SMALL_T)
          and os.path.samefile(meta["source_draft"], SMALL_D), json.dumps(meta))
    tcfg, dcfg = json.load(open(os.path.join(big_t, "config.json"))), json.load(open(os.path.join(big_d, "config.json")))
    check("grown configs have the shape (draft: 5 layers, the same taps)",
          tcfg["hidden_size"] == 1024 and tcfg["num_hidden_layers"] == 6 and tcfg["head_dim"] == 128
          and tcfg["vocab_size"] == 4096 and dcfg["num_hidden_layers"] == 5 and dcfg["hidden_size"] == 1024
          and dcfg["dflash_config"]["target_layer_ids"] == [0, 1, 2, 3], json.dumps(dcfg))
    V = tcfg["vocab_size"]

    # Dead weights are real numbers (they cost what real weights cost), not zeros: a live
    # layer's q_proj on the dead hidden columns, and an extra layer's up_proj on dead columns.
    st = os.path.join(big_t, "model.safetensors")
    (rows_q, cols_q), q0 = f32_tensor(st, "model.layers.0.self_attn.q_proj.weight")
    (_, cols_u), u5 = f32_tensor(st, "model.layers.5.mlp.up_proj.weight")
    dead_q = [q0[r * cols_q + c] for r in range(rows_q) for c in range(258, cols_q, 97)]  # 256, 257: constant channels
    live_u5 = [u5[r * cols_u + c] for r in range(0, 1024, 7) for c in range(256)]
    dead_u5 = [u5[r * cols_u + c] for r in range(0, 1024, 7) for c in range(258, cols_u, 31)]
    check("dead weights are random, live inputs of extra layers are zero",
          sum(x != 0 for x in dead_q) > 0.99 * len(dead_q) and sum(x != 0 for x in dead_u5) > 0.99 * len(dead_u5)
          and not any(live_u5))

    worst, min_gap = check_grown_pair(tmp, SMALL_T, SMALL_D, big_t, big_d, LIVE_V, V)
    # The v1 (DFlashDraftModel) draft grows too: the same block from the same context.
    grown1 = os.path.join(tmp, "grown1")
    run("graft", "--draft", SMALL_D1, "--shape", "qwen3-graft-test", "--out", grown1, "--dtype", "f32")
    ids = generate(SMALL_T, PROMPTS[0])
    ids = ids["prompt_ids"] + ids["ids"]
    si, sl = draft_logits(SMALL_T, SMALL_D1, ids[:-3], ids[-3], os.path.join(tmp, "ds.bin"), LIVE_V)
    bi, bl = draft_logits(os.path.join(grown1, "target"), os.path.join(grown1, "draft"), ids[:-3], ids[-3],
                          os.path.join(tmp, "db.bin"), V)
    drel = max(rel_diff(b, a) for a, b in zip(sl, bl))
    check("v1 draft: grown logits within 1e-4 relative, the same argmax per row, padding never on top",
          drel <= 1e-4 and all(argmax(b) == argmax(a) < LIVE_V for a, b in zip(sl, bl)), f"worst {drel:.3g}")
    # An untied grown head (as qwen3-8b's): live rows trained, padding rows the mean, dead
    # columns random.
    grown_u = os.path.join(tmp, "grown_u")
    run("graft", "--shape", "qwen3-graft-test-untied", "--out", grown_u, "--dtype", "f32")
    ls = logits(SMALL_T, ids, os.path.join(tmp, "s.bin"), LIVE_V)
    lb = logits(os.path.join(grown_u, "target"), ids, os.path.join(tmp, "b.bin"), V)
    rel = max(rel_diff(b, a) for a, b in zip(ls, lb))
    gap = min(max(b[:LIVE_V]) - max(b[LIVE_V:]) for b in lb)
    check("untied head: logits within 1e-5 relative, padding >= 1000 below the live maximum",
          rel <= 1e-5 and gap >= 1000.0 and json.load(open(os.path.join(grown_u, "target", "config.json")))[
              "tie_word_embeddings"] is False, f"worst {rel:.3g}, gap {gap:.3g}")
    print(f"worst relative logit difference {worst:.3g}, smallest live-max minus padding-max gap {min_gap:.3g}")

finish()
