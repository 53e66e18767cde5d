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
import array
import json
import os
import subprocess
import tempfile

from harness import BIN, SRC, check, finish  # noqa: E402

DEMO = os.path.join(SRC, "models", "demo")
SMALL_T, SMALL_D = os.path.join(DEMO, "target"), os.path.join(DEMO, "draft2")
SMALL_D1 = os.path.join(DEMO, "draft")
LIVE_V = 4032
PROMPTS = ["def parse_args(argv):\n    ", "class Queue:\n    def __init__(self", "import os\nimport sys\n\n"]


def run(*args):
    r = subprocess.run([BIN, *args], capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(args[:1])} failed: {r.stderr}")
    return r.stdout


def generate(model, prompt, *extra):
    return json.loads(run("generate", "--model", model, "--prompt", prompt, "--max-tokens", "24", "--weights", "f32",
                          "--json", *extra))


def rows(path, vocab):
    a = array.array("f")
    with open(path, "rb") as f:
        a.frombytes(f.read())
    return [a[i:i + vocab] for i in range(0, len(a), vocab)]


def argmax(row):
    return max(range(len(row)), key=row.__getitem__)


def rel_diff(big, small):
    """Largest |big - small| over the live ids, relative to the small row's largest |logit|."""
    return max(abs(b - s) for b, s in zip(big, small)) / max(abs(s) for s in small)


def f32_tensor(path, name):
    """One F32 tensor of a safetensors file, flat."""
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
        lo, hi = header[name]["data_offsets"]
        f.seek(8 + n + lo)
        a = array.array("f")
        a.frombytes(f.read(hi - lo))
    return header[name]["shape"], a


def logits(model, ids, out, vocab):
    run("logits", "--model", model, "--prompt-ids", ",".join(map(str, ids)), "--weights", "f32", "--out", out)
    return rows(out, vocab)


def draft_logits(model, draft, ids, first, out, vocab):
    info = json.loads(run("draft-logits", "--model", model, "--draft", draft, "--prompt-ids", ",".join(map(str, ids)),
                          "--block-first", str(first), "--weights", "f32", "--out", out))
    return info, rows(out, vocab)


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

    worst, min_gap = 0.0, float("inf")
    for i, prompt in enumerate(PROMPTS):
        small, big = generate(SMALL_T, prompt), generate(big_t, prompt)
        check(f"prompt {i}: grown greedy ids equal the small target's", small["ids"] == big["ids"],
              f"{small['ids']} vs {big['ids']}")
        ids = small["prompt_ids"] + small["ids"]
        ls, lb = logits(SMALL_T, ids, os.path.join(tmp, "s.bin"), LIVE_V), logits(big_t, ids, os.path.join(tmp, "b.bin"), V)
        rel = [rel_diff(b, a) for a, b in zip(ls, lb)]
        worst = max(worst, max(rel))
        check(f"prompt {i}: logits within 1e-5 relative at all {len(ids)} positions", max(rel) <= 1e-5,
              f"worst {max(rel):.3g} at position {rel.index(max(rel))}")
        check(f"prompt {i}: the argmax over the grown vocabulary is live at every position",
              all(argmax(b) == argmax(a) < LIVE_V for a, b in zip(ls, lb)))
        gap = min(max(b[:LIVE_V]) - max(b[LIVE_V:]) for b in lb)
        min_gap = min(min_gap, gap)
        check(f"prompt {i}: padding logits sit >= 1000 below the live maximum", gap >= 1000.0, f"gap {gap:.3g}")

        # The draft on the same context: same block, same logits up to rounding.
        ctx = ids[:-4]
        si, sl = draft_logits(SMALL_T, SMALL_D, ctx, ids[-4], os.path.join(tmp, "ds.bin"), LIVE_V)
        bi, bl = draft_logits(big_t, big_d, ctx, ids[-4], os.path.join(tmp, "db.bin"), V)
        check(f"prompt {i}: the grown draft proposes the small draft's block", si["tokens"] == bi["tokens"],
              f"{si['tokens']} vs {bi['tokens']}")
        drel = max(rel_diff(b, a) for a, b in zip(sl, bl))
        dgap = min(max(b[:LIVE_V]) - max(b[LIVE_V:]) for b in bl)
        check(f"prompt {i}: draft logits within 1e-4 relative, padding >= 1000 below the draft's live maximum",
              drel <= 1e-4 and dgap >= 1000.0, f"worst {drel:.3g}, gap {dgap:.3g}")

        # A speculative run: the same emitted ids and the same acceptance, step by step.
        spec = ("--block-size", "8", "--no-adaptive")
        ss, sb = generate(SMALL_T, prompt, "--draft", SMALL_D, *spec), generate(big_t, prompt, "--draft", big_d, *spec)
        check(f"prompt {i}: speculative run on the grown pair accepts what the small pair accepts",
              ss["ids"] == sb["ids"] == small["ids"] and ss["dflash"]["accept_lens"] == sb["dflash"]["accept_lens"],
              f"{ss['dflash']['accept_lens']} vs {sb['dflash']['accept_lens']}")
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
