#!/usr/bin/python3
"""Engine DFlash2 drafts vs the PyTorch reference (tools/reference/dflash2_draft.py).

For random DFlash2 drafts of several shapes (conv group 16, kernel 2 and 3, top-k 16 and 4,
with and without softcap / output multiplier / embedding scale, full, symmetric-window and
causal-window attention), f32 and bf16:
  dflash draft-logits ... --hidden-out H   -> logits and normed hidden states within
      tolerance of the float64 reference, the greedy selector walk identical, and the sampled
      walk (--temperature, --uniforms) identical with the same q;
  dflash generate --draft D2 (greedy)     -> token-exact with the reference's plain greedy.
The reference is first checked against itself: its all-at-once edge scores against a walk
that recomputes each edge from the codebooks step by step.
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

SRC = os.environ.get("DFLASH_SOURCE_DIR") or os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(SRC, "tools"))
from make_model import make_model  # noqa: E402
from make_draft2 import make_draft2  # noqa: E402
from reference.dflash2_draft import candidates, load_draft2  # noqa: E402
from reference.dflash_loop import plain_greedy, target_pass  # noqa: E402
from reference.transformer import load_hf_folder  # noqa: E402

TOL_F32, TOL_BF16 = 1e-4, 1e-3  # as test_draft_vs_torch: relative to max|value|
BIN = os.environ.get("DFLASH_BIN") or os.path.join(SRC, "build", "dflash")
T128 = dict(arch="qwen3", hidden=128, layers=4, heads=4, kv_heads=4, head_dim=32, ffn=384,
            vocab=512, tie=False)
CASES = [
    ("k2_top16_full", T128, dict(layers=1, block_size=4, selector_rank=32, top_k=16)),
    ("k2_top4_softcap_mult_win4", dict(T128, hidden=256, kv_heads=2, head_dim=64, vocab=768, tie=True),
     dict(layers=2, block_size=8, heads=4, kv_heads=2, head_dim=64, ffn=512, selector_rank=64, top_k=4,
          softcap=30.0, multiplier=0.5, embed_scale=1.3, sliding_window=4, is_causal=False)),
    ("k3_top16_causalwin_minimal", dict(T128, layers=7, kv_heads=2, ffn=256),
     dict(layers=2, block_size=8, conv_kernel=3, selector_rank=16, top_k=16, softcap=15.0,
          sliding_window=3, minimal_config=True)),
    ("k2_top4_mult_causal_full", T128,
     dict(layers=1, block_size=8, selector_rank=32, top_k=4, multiplier=2.0, is_causal=True)),
]
n_pass = n_fail = 0


def report(ok, name, detail):
    global n_pass, n_fail
    n_pass, n_fail = n_pass + ok, n_fail + (not ok)
    print(f"{'PASS' if ok else 'FAIL'} {name}: {detail}", flush=True)


def run_engine(args):
    p = subprocess.run([BIN] + args, capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        raise RuntimeError(f"exit {p.returncode}: {p.stderr.strip()[-400:]}")
    return json.loads([l for l in p.stdout.splitlines() if l.strip().startswith("{")][-1])


def check_reference_walk(name, draft, anchor, h, logits):
    """All-positions edge scores == step-by-step recomputation from the codebooks."""
    toks, cand, _, scores = draft.walk(anchor, h, logits)
    sel = draft.candidate_selector
    hp = sel.hidden_projection(h)
    prev, ok = anchor, True
    for t in range(len(toks)):
        c = candidates(logits[t], draft.cfg2.selector_top_k)
        s = logits[t, c] + ((sel.predecessor_codebook[prev] * hp[t]) * sel.successor_codebook[c]).sum(-1)
        ok &= bool(torch.equal(c, cand[t])) and float((s - scores[t]).abs().max()) < 1e-9
        prev = int(c[int(torch.argmax(s))])
        ok &= prev == toks[t]
    changed = sum(int(a != b) for a, b in zip(toks, logits.argmax(-1).tolist()))
    report(ok, f"{name} reference walk", f"tokens {toks}, {changed} differ from the argmax")


def main():
    torch.set_num_threads(1)
    if not os.access(BIN, os.X_OK):
        report(False, "engine binary", f"not found: {BIN}")
        return 1
    with tempfile.TemporaryDirectory(prefix="dflash2_oracle_") as tmp:
        for i, (name, tspec, dspec) in enumerate(CASES):
            seed = 41 + 5 * i
            for dtype, tol in (("f32", TOL_F32), ("bf16", TOL_BF16)):
                tdir, ddir = os.path.join(tmp, f"{name}_{dtype}_t"), os.path.join(tmp, f"{name}_{dtype}_d")
                tcfg = make_model(tdir, seed=seed, dtype=dtype, **tspec)
                make_draft2(tdir, ddir, dtype=dtype, seed=seed + 1, **dspec)
                _, target = load_hf_folder(tdir, torch.float64)
                cfg, draft = load_draft2(ddir, tcfg.num_hidden_layers, torch.float64)
                B, V = cfg.block_size, tcfg.vocab_size
                g = torch.Generator().manual_seed(seed)
                for P in (1, 19):
                    prompt = torch.randint(0, V - 4, (P,), generator=g).tolist()
                    first = int(torch.randint(0, V - 4, (1,), generator=g))
                    tag = f"{name} {dtype} P={P}"
                    try:
                        _, feats = target_pass(target, prompt, cfg.target_layer_ids)
                        with torch.no_grad():
                            h, logits = draft.block(feats, first, target.embed_tokens.weight,
                                                    target.output_weight(), B)
                        if dtype == "f32" and P == 19:
                            check_reference_walk(name, draft, first, h, logits)
                        out, hout = os.path.join(tmp, "l.bin"), os.path.join(tmp, "h.bin")
                        base = ["draft-logits", "--model", tdir, "--draft", ddir, "--prompt-ids",
                                ",".join(map(str, prompt)), "--block-first", str(first),
                                "--weights", dtype, "--out", out, "--hidden-out", hout]
                        info = run_engine(base)
                        el = torch.from_numpy(np.fromfile(out, "<f4").astype(np.float64)).view(B - 1, V)
                        eh = torch.from_numpy(np.fromfile(hout, "<f4").astype(np.float64)).view(B - 1, -1)
                        dl = float((el - logits).abs().max() / logits.abs().max())
                        dh = float((eh - h).abs().max() / h.abs().max())
                        report(info["kind"] == "dflash2" and dl <= tol and dh <= tol, f"{tag} logits/hidden",
                               f"rel max|diff| logits {dl:.2g} hidden {dh:.2g} (tol {tol:g})")
                        want = draft.walk(first, h, logits)[0]
                        report(info["tokens"] == want, f"{tag} greedy walk",
                               f"engine {info['tokens']} ref {want}")
                        u = torch.rand(B - 1, generator=g, dtype=torch.float64).tolist()
                        info = run_engine(base + ["--temperature", "0.8", "--uniforms",
                                                  ",".join(f"{x:.17g}" for x in u)])
                        wt, wc, wq, _ = draft.walk(first, h, logits, 0.8, u)
                        dq = max(float((torch.tensor(q, dtype=torch.float64) - wq[t]).abs().max())
                                 for t, q in enumerate(info["q"]))
                        report(info["tokens"] == wt and info["cand"] == wc.tolist() and dq <= 10 * tol,
                               f"{tag} sampled walk", f"engine {info['tokens']} ref {wt}, max|dq| {dq:.2g}")
                    except Exception as e:
                        report(False, tag, f"{type(e).__name__}: {str(e)[-300:]}")
                if dtype == "f32":
                    try:
                        prompt = torch.randint(0, V - 4, (12,), generator=g).tolist()
                        want = plain_greedy(target, prompt, 30)
                        r = run_engine(["generate", "--model", tdir, "--draft", ddir, "--block-size", str(B),
                                        "--prompt-ids", ",".join(map(str, prompt)), "--max-tokens", "30",
                                        "--temperature", "0", "--weights", "f32", "--ignore-eos",
                                        "--no-adaptive", "--json"])
                        report([int(x) for x in r["ids"]] == want and r["dflash"]["speculation"] == "on",
                               f"{name} engine dflash2 generate == greedy",
                               f"{len(r['ids'])} tokens, steps {len(r['dflash']['accept_lens'])}")
                    except Exception as e:
                        report(False, f"{name} generate", f"{type(e).__name__}: {str(e)[-300:]}")
    print(f"{n_pass} passed, {n_fail} failed")
    return 1 if n_fail else 0


if __name__ == "__main__":
    sys.exit(main())
