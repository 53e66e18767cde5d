#!/usr/bin/python3
"""Engine DFlash draft logits and speculative decoding vs the PyTorch reference.

Env: DFLASH_BIN (engine binary), DFLASH_SOURCE_DIR. For random target+draft pairs:
  dflash draft-logits --model T --draft D --prompt-ids ... --block-first ID --block-size B
                      --weights f32|bf16 --out F        (-> raw f32 [(B-1) x vocab])
  dflash generate --model T --draft D --block-size B --prompt-ids ... --max-tokens 40
                  --temperature 0 --weights f32 --ignore-eos --no-adaptive --json
The reference runs in float64 on exactly the stored values. Before the engine is asked
anything, the reference itself is checked: against a naive numpy re-implementation of the
draft block, its decode loop against plain greedy, and the default-tap formula.
"""
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch

SRC = os.environ.get("DFLASH_SOURCE_DIR") or os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(SRC, "tools"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_model import make_model  # noqa: E402
from make_draft import make_draft  # noqa: E402
from reference.dflash_draft import default_target_layer_ids, load_draft, save_draft  # noqa: E402
from reference.dflash_loop import dflash_generate, plain_greedy, target_pass  # noqa: E402
from reference.transformer import load_hf_folder  # noqa: E402
import _draft_fit  # noqa: E402
import _draft_naive  # noqa: E402

# f32: as in test_logits_vs_torch, fp32 accumulation over <= 1024-term dot products a few
# layers deep (target taps, then the draft) gives ~1e-6..1e-5 of the logit scale.
TOL_F32 = 1e-4
# bf16 weights: the engine multiplies the same bf16 values (upcast) as the reference, so only
# summation order differs (an fp32 engine stand-in on these pairs: 1.4e-5..4.4e-5 of
# max|logit|); 10x the f32 bound admits other fp32 blockings but not bf16 activations, which
# move these logits by 5e-3..4.5e-2 of max|logit| (the reference under bf16 autocast).
TOL_BF16 = 1e-3
NAIVE_TOL = 1e-9   # two float64 implementations of the same formula
GEN_LEN, LOOP_PROMPT = 40, 16
FIT_STEPS = 30  # enough for accept_lens to mix misses, partial and full blocks

# Together: drafts of 1, 2 and 3 layers; taps from the config and from the formula
# (including round-half-to-even, N=7 L=3 -> [1,2,4], and duplicate taps, N=4 L=2 -> [1,1]);
# GQA 1:1 and 2:1; draft head_dim != target's; dflash keys at the top level, all in
# dflash_config, and z-lab's split (block_size on top, the rest nested); block sizes
# 4 and 8; tied and untied targets; the draft's rope_theta differs from the target's.
T128 = dict(arch="qwen3", hidden=128, layers=4, heads=4, kv_heads=4, head_dim=32, ffn=384,
            vocab=512, tie=False)
PAIRS = [
    ("t4h128_d1_formula_top_b4_mha", T128,
     dict(layers=1, block_size=4, heads=4, kv_heads=4, head_dim=32, ffn=256, config_style="top"),
     [2]),
    ("t4h256tied_d2_ids13_zlab_b8_gqa2", dict(arch="qwen3", hidden=256, layers=4, heads=4,
                                                  kv_heads=2, head_dim=64, ffn=512, vocab=768,
                                                  tie=True),
     dict(layers=2, block_size=8, target_layer_ids=[1, 3], heads=4, kv_heads=2, head_dim=64,
          ffn=512, config_style="zlab"), [1, 3]),
    ("t7h128_d3_formula_halfeven_top_b8_gqa2_hd16", dict(T128, layers=7, kv_heads=2, ffn=256),
     dict(layers=3, block_size=8, heads=8, kv_heads=4, head_dim=16, ffn=256, config_style="top"),
     [1, 2, 4]),
    ("t4h128_d2_formula_dup_nested_b4_gqa2_hd64", T128,
     dict(layers=2, block_size=4, heads=2, kv_heads=1, head_dim=64, ffn=384,
          config_style="nested"), [1, 1]),
]
FORMULA = {(36, 5): [1, 9, 17, 25, 33], (64, 5): [1, 16, 31, 46, 61], (32, 5): [1, 8, 15, 22, 29],
           (48, 5): [1, 12, 23, 34, 45], (7, 3): [1, 2, 4], (4, 1): [2], (36, 1): [18]}

n_pass = n_fail = 0


def report(ok, name, detail):
    global n_pass, n_fail
    n_pass, n_fail = n_pass + ok, n_fail + (not ok)
    print(f"{'PASS' if ok else 'FAIL'} {name}: {detail}", flush=True)


def guarded(name, fn):
    try:
        fn()
    except Exception as e:  # a failure is one failed check, not a crash
        report(False, name, f"{type(e).__name__}: {str(e)[-400:]}")


def find_bin():
    b = os.environ.get("DFLASH_BIN")
    return b or os.path.join(os.environ.get("DFLASH_BUILD_DIR", os.path.join(SRC, "build")), "dflash")


def run_engine(args, timeout=120):
    p = subprocess.run([BIN] + args, capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        raise RuntimeError(f"exit {p.returncode}: {p.stderr.strip()[-400:]}")
    out = p.stdout
    try:
        return json.loads(out)
    except ValueError:
        return json.loads([l for l in out.splitlines() if l.strip().startswith("{")][-1])


def ids_arg(ids):
    return ",".join(map(str, ids))


# --------------------------------------------------------------------------------------
class Pair:
    """One target + draft, written f32 and bf16, with float64 references loaded."""

    def __init__(self, name, tspec, dspec, want_ids, tmp, seed):
        self.name, self.dspec, self.want_ids = name, dict(dspec), want_ids
        self.t32, self.t16 = os.path.join(tmp, name + "_t"), os.path.join(tmp, name + "_t16")
        self.d32, self.d16 = os.path.join(tmp, name + "_d"), os.path.join(tmp, name + "_d16")
        self.dfit = os.path.join(tmp, name + "_dfit")
        self.tcfg = make_model(self.t32, seed=seed, dtype="f32", **tspec)
        make_model(self.t16, seed=seed, dtype="bf16", **tspec)
        make_draft(self.t32, self.d32, dtype="f32", seed=seed + 1, **dspec)
        make_draft(self.t16, self.d16, dtype="bf16", seed=seed + 1, **dspec)
        N = self.tcfg.num_hidden_layers
        _, self.target = load_hf_folder(self.t32, torch.float64)
        _, self.target16 = load_hf_folder(self.t16, torch.float64)
        self.dcfg, self.draft = load_draft(self.d32, N, torch.float64)
        _, self.draft16 = load_draft(self.d16, N, torch.float64)
        self.B = dspec["block_size"]
        self.V = self.tcfg.vocab_size
        self.rng = torch.Generator().manual_seed(seed)

    def random_ids(self, n):
        return torch.randint(0, self.V - 4, (n,), generator=self.rng).tolist()

    def ref_logits(self, target, draft, prompt, first):
        _, feats = target_pass(target, prompt, draft.cfg.target_layer_ids)
        with torch.no_grad():
            return draft.block_logits(feats, first, target.embed_tokens.weight,
                                      target.output_weight(), self.B)


def check_reference(p):
    """The reference against itself: config parsing, the naive block, save/load."""
    with open(os.path.join(p.d32, "config.json")) as f:
        raw = json.load(f)
    dc = raw.get("dflash_config") or {}
    named = "target_layer_ids" in raw or "target_layer_ids" in dc
    style = p.dspec["config_style"]
    style_ok = (("block_size" in raw) == (style != "nested") and ("block_size" in dc) == (style == "nested")
                and ("mask_token_id" in raw) == (style == "top"))
    formula = "target_layer_ids" not in p.dspec
    report(p.dcfg.target_layer_ids == p.want_ids and named != formula and style_ok,
           f"{p.name} ref config", f"taps {p.dcfg.target_layer_ids} (want {p.want_ids}), "
           f"ids in config: {named}, style {p.dspec['config_style']}")
    prompt, first = p.random_ids(11), p.random_ids(1)[0]
    ref = p.ref_logits(p.target, p.draft, prompt, first)
    _, feats = target_pass(p.target, prompt, p.dcfg.target_layer_ids)
    sd = {k: v.detach().numpy() for k, v in p.draft.state_dict().items()}
    naive = _draft_naive.block_logits(sd, p.dcfg, feats.numpy(), first,
                                      p.target.embed_tokens.weight.detach().numpy(),
                                      p.target.output_weight().detach().numpy(), p.B)
    d = np.abs(naive - ref.detach().numpy()).max() / np.abs(naive).max()
    report(d <= NAIVE_TOL, f"{p.name} ref vs naive numpy block",
           f"rel max|diff| {d:.2g} (<= {NAIVE_TOL:g}), {len(set(ref.argmax(-1).tolist()))} "
           f"distinct argmaxes over {p.B - 1} rows")


def check_close(name, eng, ref, rel_tol):
    scale = ref.abs().max().item()
    diff = (eng - ref).abs().max().item()
    ea, ra = eng.argmax(-1), ref.argmax(-1)
    real, ties = [], []
    for t in torch.nonzero(ea != ra).flatten().tolist():
        margin = (ref[t, ra[t]] - ref[t, ea[t]]).item()  # near-tie: either answer is right
        (ties if margin <= 2 * rel_tol * scale else real).append(t)
    note = f", near-tie rows {ties}" if ties else ""
    report(diff <= rel_tol * scale and not real, name,
           f"max|diff|={diff:.3g} max|logit|={scale:.3g} (tol {rel_tol:g}*max), argmax "
           f"mismatch rows {real}{note}")


def engine_draft_logits(p, tdir, ddir, prompt, first, weights, tmp):
    out = os.path.join(tmp, "draft_logits.bin")
    info = run_engine(["draft-logits", "--model", tdir, "--draft", ddir, "--prompt-ids",
                       ids_arg(prompt), "--block-first", str(first), "--block-size", str(p.B),
                       "--weights", weights, "--out", out])
    if info.get("rows") != p.B - 1 or info.get("vocab") != p.V:
        raise RuntimeError(f"engine reported {info}, want rows={p.B - 1} vocab={p.V}")
    arr = np.fromfile(out, dtype="<f4")
    if arr.size != (p.B - 1) * p.V:
        raise RuntimeError(f"{arr.size} floats in --out, want {(p.B - 1) * p.V}")
    return torch.from_numpy(arr.astype(np.float64)).view(p.B - 1, p.V)


def check_engine_logits(p, tmp):
    for n in (1, 24):  # one context row (the shortest prompt), and many
        prompt, first = p.random_ids(n), p.random_ids(1)[0]
        guarded(f"{p.name} f32 draft-logits P={n}", lambda: check_close(
            f"{p.name} f32 draft-logits P={n}",
            engine_draft_logits(p, p.t32, p.d32, prompt, first, "f32", tmp),
            p.ref_logits(p.target, p.draft, prompt, first), TOL_F32))
    prompt, first = p.random_ids(17), p.random_ids(1)[0]
    guarded(f"{p.name} bf16 draft-logits", lambda: check_close(
        f"{p.name} bf16 draft-logits",
        engine_draft_logits(p, p.t16, p.d16, prompt, first, "bf16", tmp),
        p.ref_logits(p.target16, p.draft16, prompt, first), TOL_BF16))


def fitted_draft(p):
    """The f32 draft after a short fit to the target's greedy text (see _draft_fit)."""
    N = p.tcfg.num_hidden_layers
    _, t32 = load_hf_folder(p.t32, torch.float32)
    _, d32 = load_draft(p.d32, N, torch.float32)
    prompts = [p.loop_prompt] + [p.random_ids(LOOP_PROMPT) for _ in range(3)]
    _draft_fit.fit_draft(t32, d32, prompts, GEN_LEN + 2 * p.B, FIT_STEPS, p.B)
    save_draft(p.dfit, d32, dtype="f32", style=p.dspec["config_style"],
               write_ids="target_layer_ids" in p.dspec)
    return load_draft(p.dfit, N, torch.float64)[1]


def check_loop_reference(p, draft):
    """The reference loop is lossless, stops at max_tokens and at an accepted eos."""
    want = plain_greedy(p.target, p.loop_prompt, GEN_LEN)
    res = dflash_generate(p.target, draft, p.loop_prompt, GEN_LEN, p.B)
    report(res["ids"] == want and len(res["ids"]) == GEN_LEN, f"{p.name} ref loop == greedy",
           f"{len(res['ids'])} tokens, accept_lens {res['accept_lens']}")
    # an eos that the loop emits as an accepted draft token (not as a bonus token)
    pos, inside = 1, None
    for a in res["accept_lens"]:
        if a and inside is None and res["ids"][pos] not in res["ids"][:pos]:
            inside = pos
        pos += a + 1
    if inside is None:
        report(False, f"{p.name} ref loop eos", "no accepted token to use as eos")
        return res
    eos = res["ids"][inside]
    got = dflash_generate(p.target, draft, p.loop_prompt, GEN_LEN, p.B, eos_ids={eos})["ids"]
    short = dflash_generate(p.target, draft, p.loop_prompt, inside, p.B)["ids"]
    report(got == want[:inside + 1] and short == want[:inside], f"{p.name} ref loop stops",
           f"at accepted eos {eos} after {len(got)} tokens; at max_tokens={inside}: {len(short)}")
    return res


def check_engine_loop(p, draft, ref):
    """The engine never verifies more tokens than it may still emit (B = min(B, left), a plain
    step for a last single token), so its last steps are compared with the reference loop
    run the same way; the ids must equal the uncapped loop's and plain greedy."""
    want = ref["ids"]
    capped = dflash_generate(p.target, draft, p.loop_prompt, GEN_LEN, p.B, cap_block=True)
    if capped["ids"] != want:
        raise RuntimeError("reference loop: capped blocks changed the ids")
    r = run_engine(["generate", "--model", p.t32, "--draft", p.dfit, "--block-size", str(p.B),
                    "--prompt-ids", ids_arg(p.loop_prompt), "--max-tokens", str(GEN_LEN),
                    "--temperature", "0", "--weights", "f32", "--ignore-eos", "--no-adaptive",
                    "--json"])
    got = [int(i) for i in r["ids"]]
    k = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), None)
    report(got == want, f"{p.name} engine dflash ids == greedy",
           f"{len(got)} tokens" if got == want else
           f"first difference at {k}: engine {got[k:k + 4] if k is not None else got[len(want):]}"
           f" ref {want[k:k + 4] if k is not None else want[len(got):]}")
    d = r.get("dflash") or {}
    acc = [int(x) for x in d.get("accept_lens", [])]
    stats_ok = d.get("accepted") == capped["accepted"] and d.get("drafted") == capped["drafted"]
    report(acc == capped["accept_lens"] and stats_ok, f"{p.name} engine accept_lens",
           f"engine {acc} ref {capped['accept_lens']} (blocks {capped['block_sizes']}); drafted "
           f"{d.get('drafted')} accepted {d.get('accepted')} (want {capped['drafted']}, "
           f"{capped['accepted']})")


def main():
    global BIN
    torch.manual_seed(0)
    torch.set_num_threads(1)
    t0 = time.time()
    got = {k: default_target_layer_ids(*k) for k in FORMULA}
    report(got == FORMULA, "default target_layer_ids formula",
           ", ".join(f"N={n} L={l} -> {v}" for (n, l), v in got.items()))
    BIN = find_bin()
    have_bin = os.access(BIN, os.X_OK)
    if not have_bin:
        report(False, "engine binary", f"not found: {BIN}")
    with tempfile.TemporaryDirectory(prefix="dflash_draft_oracle_") as tmp:
        for i, (name, tspec, dspec, want_ids) in enumerate(PAIRS):
            p = Pair(name, tspec, dspec, want_ids, tmp, seed=31 + 7 * i)
            p.loop_prompt = p.random_ids(LOOP_PROMPT)
            guarded(f"{name} reference", lambda: check_reference(p))
            if have_bin:
                check_engine_logits(p, tmp)
            try:
                fitted = fitted_draft(p)
                ref = check_loop_reference(p, fitted)
            except Exception as e:
                report(False, f"{name} ref loop", f"{type(e).__name__}: {e}")
                continue
            if have_bin:
                guarded(f"{name} engine loop", lambda: check_engine_loop(p, fitted, ref))
    print(f"({time.time() - t0:.1f} s)")
    print(f"{n_pass} passed, {n_fail} failed")
    return 1 if n_fail else 0


if __name__ == "__main__":
    sys.exit(main())
