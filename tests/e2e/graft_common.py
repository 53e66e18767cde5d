"""What the dflash graft tests share (test_graft.py: dense Qwen3; test_graft_hybrid.py: the
Qwen3.5 hybrid): running the binary, reading logits files and tensors, and the checks every
grown pair must pass against its small pair."""
import array
import json
import subprocess

from harness import BIN, check  # noqa: E402

PROMPTS = ["def parse_args(argv):\n    ", "class Queue:\n    def __init__(self", "import os\nimport sys\n\n"]


def run(*args):
    r = subprocess.run([BIN, *args], capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(args[:1])} failed: {r.stderr}")
    return r.stdout


def run_fails(*args):
    """(exit status, stderr) of a run that is expected to be refused."""
    r = subprocess.run([BIN, *args], capture_output=True, text=True, timeout=300)
    return r.returncode, r.stderr


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


def check_grown_pair(tmp, small_t, small_d, big_t, big_d, live_v, vocab):
    """Per prompt: the grown target's greedy ids and logits (1e-5 relative) equal the small
    target's, padding ids never win and sit >= 1000 below, the grown draft proposes the small
    draft's block, and a speculative run accepts what the small pair accepts. Returns the worst
    relative logit difference and the smallest padding gap."""
    import os
    worst, min_gap = 0.0, float("inf")
    for i, prompt in enumerate(PROMPTS):
        small, big = generate(small_t, prompt), generate(big_t, prompt)
        check(f"prompt {i}: grown greedy ids equal the small target's", small["ids"] == big["ids"],
              f"{small['ids']} vs {big['ids']}")
        ids = small["prompt_ids"] + small["ids"]
        ls = logits(small_t, ids, os.path.join(tmp, "s.bin"), live_v)
        lb = logits(big_t, ids, os.path.join(tmp, "b.bin"), vocab)
        rel = [rel_diff(b, a) for a, b in zip(ls, lb)]
        worst = max(worst, max(rel))
        check(f"prompt {i}: logits within 1e-5 relative at all {len(ids)} positions", max(rel) <= 1e-5,
              f"worst {max(rel):.3g} at position {rel.index(max(rel))}")
        check(f"prompt {i}: the argmax over the grown vocabulary is live at every position",
              all(argmax(b) == argmax(a) < live_v for a, b in zip(ls, lb)))
        gap = min(max(b[:live_v]) - max(b[live_v:]) for b in lb)
        min_gap = min(min_gap, gap)
        check(f"prompt {i}: padding logits sit >= 1000 below the live maximum", gap >= 1000.0, f"gap {gap:.3g}")

        # The draft on the same context: same block, same logits up to rounding.
        ctx = ids[:-4]
        si, sl = draft_logits(small_t, small_d, ctx, ids[-4], os.path.join(tmp, "ds.bin"), live_v)
        bi, bl = draft_logits(big_t, big_d, ctx, ids[-4], os.path.join(tmp, "db.bin"), vocab)
        check(f"prompt {i}: the grown draft proposes the small draft's block", si["tokens"] == bi["tokens"],
              f"{si['tokens']} vs {bi['tokens']}")
        drel = max(rel_diff(b, a) for a, b in zip(sl, bl))
        dgap = min(max(b[:live_v]) - max(b[live_v:]) for b in bl)
        check(f"prompt {i}: draft logits within 1e-4 relative, padding >= 1000 below the draft's live maximum",
              drel <= 1e-4 and dgap >= 1000.0, f"worst {drel:.3g}, gap {dgap:.3g}")

        # A speculative run: the same emitted ids and the same acceptance, step by step.
        spec = ("--block-size", "8", "--no-adaptive")
        ss, sb = generate(small_t, prompt, "--draft", small_d, *spec), generate(big_t, prompt, "--draft", big_d, *spec)
        check(f"prompt {i}: speculative run on the grown pair accepts what the small pair accepts",
              ss["ids"] == sb["ids"] == small["ids"] and ss["dflash"]["accept_lens"] == sb["dflash"]["accept_lens"],
              f"{ss['dflash']['accept_lens']} vs {sb['dflash']['accept_lens']}")
    return worst, min_gap
