#!/usr/bin/python3
"""Golden outputs of the engine: record them once, then check that every later build gives
them again bit for bit (tests/data/golden/README.md).

  golden.py record --targets AVX3,AVX2,SSE4,EMU128 --positions-for AVX3 --jobs 2 --threads 1
  golden.py check [--simd-target T|all|others] [--modes ..] [--no-generate] [--only CELL,..]

What is recorded, for the demo target, the random-pair target and the demo target converted
to GGUF by `dflash convert` (f32, bf16, q8_0 and q4_0 files, loaded with --weights native):
  - the SHA-256 of each converted GGUF file;
  - for weights {f32, bf16, q8, q4} x KV cache {f32, f16, q8, q4} x mode {decode, verify,
    prefill} (`dflash logits --mode`; verify: a 37-row prefill, then 5-row blocks with
    rollback; prefill: 512-row chunks) on a 600-id prompt, the SHA-256 of every position's
    float32 logits row;
  - for weights x KV cache, the greedy ids (`dflash generate --json`, temperature 0, 32 tokens,
    --ignore-eos, the prompt's first 160 ids) and, with each of the model's drafts (DFlash,
    DFlash2) at block size 8 (the drafts' own) and 4, the speculative ids and each step's
    accepted length (--no-adaptive, so the blocks do not depend on timing).
Logits depend on the SIMD target Highway dispatches to (AVX3, AVX2, SSE4 and EMU128 each give
other bits, and even greedy ids differ in a few q8 cells), so everything is recorded per target,
each held with --simd-target. Identical per-position hash lists are stored once, under the
SHA-256 of their newline-joined hex strings; targets not in --positions-for keep only that
digest per config and mode (a difference is caught, not located).
"""
import argparse
import concurrent.futures as cf
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time

SRC = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOLDEN = os.path.join(SRC, "tests", "data", "golden", "golden.json")

WEIGHTS = ["f32", "bf16", "q8", "q4"]
KV = ["f32", "f16", "q8", "q4"]
MODES = ["decode", "verify", "prefill"]
GGUF_TYPE = {"f32": "f32", "bf16": "bf16", "q8": "q8_0", "q4": "q4_0"}
N_PROMPT = 600
CHUNK = 512
VERIFY_ROWS = 5
VERIFY_PREFIX = 37
GEN_TOKENS = 32
GEN_PROMPT = 160  # generation reads the first 160 prompt ids
BLOCK_SIZES = [8, 4]  # 8 is the block_size of all four drafts

# name -> (target folder, prompt name, {draft name: folder}); "gguf" targets are converted files.
MODELS = {
    "demo": ("models/demo/target", "demo", {"dflash": "models/demo/draft", "dflash2": "models/demo/draft2"}),
    "random_pair": ("tests/data/random_pair/target", "random_pair",
                    {"dflash": "tests/data/random_pair/draft", "dflash2": "tests/data/random_pair2/draft"}),
    "demo_gguf": ("gguf", "demo", {"dflash": "models/demo/draft", "dflash2": "models/demo/draft2"}),
}


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for b in iter(lambda: f.read(1 << 20), b""):
            h.update(b)
    return h.hexdigest()


class Runner:
    def __init__(self, binary, threads, tmp, simd_target=None):
        """simd_target: the Highway target to hold dispatch to (--simd-target), None for the best."""
        self.bin, self.threads, self.tmp, self.simd_target = binary, threads, tmp, simd_target

    def hold(self):
        return ["--simd-target", self.simd_target] if self.simd_target else []

    def run(self, *args):
        r = subprocess.run([self.bin, *args], capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError("dflash %s failed (%d):\n%s" % (" ".join(args), r.returncode, r.stderr[-4000:]))
        return r.stdout

    def model_path(self, model, weights):
        """The --model path and --weights option of one matrix cell."""
        folder = MODELS[model][0]
        if folder == "gguf":
            return os.path.join(self.tmp, "demo_target.%s.gguf" % GGUF_TYPE[weights]), "native"
        return os.path.join(SRC, folder), weights

    def convert(self, weights):
        out = os.path.join(self.tmp, "demo_target.%s.gguf" % GGUF_TYPE[weights])
        self.run("convert", "--model", os.path.join(SRC, "models/demo/target"), "--out", out,
                 "--type", GGUF_TYPE[weights])  # (convert has no --simd-target: its quantizer is plain code)
        return sha256_file(out)

    def logits_hashes(self, model, weights, kv, mode, prompt):
        path, w = self.model_path(model, weights)
        out = os.path.join(self.tmp, "logits.%s.%s.%s.%s.bin" % (model, weights, kv, mode))
        args = ["logits", "--model", path, "--weights", w, "--cache-type", kv, "--mode", mode,
                "--chunk-size", str(CHUNK), "--verify-rows", str(VERIFY_ROWS), "--verify-prefix", str(VERIFY_PREFIX),
                "--prompt-ids", ",".join(map(str, prompt)), "--threads", str(self.threads), "--out", out]
        info = json.loads(self.run(*args, *self.hold()))
        with open(out, "rb") as f:
            data = f.read()
        os.remove(out)
        row = 4 * info["vocab"]
        if len(data) != row * len(prompt):
            raise RuntimeError("logits file of %d bytes, expected %d" % (len(data), row * len(prompt)))
        return [hashlib.sha256(data[i * row:(i + 1) * row]).hexdigest() for i in range(len(prompt))], info

    def generate(self, model, weights, kv, prompt, draft=None, block=None):
        path, w = self.model_path(model, weights)
        args = ["generate", "--model", path, "--weights", w, "--cache-type", kv, "--temperature", "0",
                "--max-tokens", str(GEN_TOKENS), "--ignore-eos", "--json", "--threads", str(self.threads),
                "--prompt-ids", ",".join(map(str, prompt[:GEN_PROMPT])), *self.hold()]
        if draft:
            args += ["--draft", os.path.join(SRC, MODELS[model][2][draft]), "--block-size", str(block), "--no-adaptive"]
        j = json.loads(self.run(*args))
        if not draft:
            return j["ids"]
        return {"ids": j["ids"], "accept_lens": j["dflash"]["accept_lens"]}


def cell(model, weights, kv):
    return "%s/w-%s/kv-%s" % (model, weights, kv)


def cells():
    return [(m, w, k) for m in MODELS for w in WEIGHTS for k in KV]


def gen_keys():
    return ["greedy"] + ["%s/b%d" % (d, b) for d in ("dflash", "dflash2") for b in BLOCK_SIZES]


def list_digest(hashes):
    """Names a list of per-position hashes: the SHA-256 of the hex strings joined by newlines."""
    return hashlib.sha256("\n".join(hashes).encode()).hexdigest()


def compute(runner, prompts, jobs, only=None, progress=True, modes=MODES, generate=True):
    """Runs the whole matrix; returns (gguf shas, {cell: {mode: hashes}}, {cell: {gen key: ids}}, info)."""
    ggufs = {}
    for w in WEIGHTS:  # first: the GGUF cells read these files
        ggufs["demo_target.%s.gguf" % GGUF_TYPE[w]] = runner.convert(w)
    tasks = []
    for (m, w, k) in cells():
        c = cell(m, w, k)
        if only and not any(o in c for o in only.split(",")):
            continue
        prompt = prompts[MODELS[m][1]]
        for mode in modes:
            tasks.append(("logits", c, mode, lambda m=m, w=w, k=k, mode=mode, p=prompt:
                          runner.logits_hashes(m, w, k, mode, p)))
        if not generate:
            continue
        tasks.append(("gen", c, "greedy", lambda m=m, w=w, k=k, p=prompt: runner.generate(m, w, k, p)))
        for d in ("dflash", "dflash2"):
            for b in BLOCK_SIZES:
                tasks.append(("gen", c, "%s/b%d" % (d, b), lambda m=m, w=w, k=k, p=prompt, d=d, b=b:
                              runner.generate(m, w, k, p, d, b)))
    logits, gen, infos = {}, {}, {}
    t0 = time.time()
    with cf.ThreadPoolExecutor(max_workers=jobs) as ex:
        futs = {ex.submit(t[3]): t for t in tasks}
        for i, f in enumerate(cf.as_completed(futs)):
            kind, c, key, _ = futs[f]
            r = f.result()
            if kind == "logits":
                logits.setdefault(c, {})[key] = r[0]
                infos.setdefault("simd_target", set()).add(r[1]["simd_target"])
            else:
                gen.setdefault(c, {})[key] = r
            if progress and (i + 1) % 50 == 0:
                print("  %d/%d runs, %.0f s" % (i + 1, len(tasks), time.time() - t0), file=sys.stderr, flush=True)
    return ggufs, logits, gen, infos


def demo_prompt(binary):
    """600 ids of /usr/lib/python3.11/base64.py (held out of the demo model's training)."""
    text = open("/usr/lib/python3.11/base64.py", encoding="utf-8").read()[:6000]
    r = subprocess.run([binary, "tokenize", "--model", os.path.join(SRC, "models/demo/target"), "--text", text,
                        "--json"], capture_output=True, text=True, check=True)
    ids = json.loads(r.stdout)
    assert len(ids) >= N_PROMPT, len(ids)
    return ids[:N_PROMPT]


def random_pair_prompt():
    """600 ids below 380 (380..383: the random pair's mask, bos, pad and eos) from a fixed LCG."""
    x, ids = 12345, []
    for _ in range(N_PROMPT):
        x = (x * 6364136223846793005 + 1442695040888963407) % (1 << 64)
        ids.append((x >> 33) % 380)
    return ids


def git(*args):
    return subprocess.run(["git", "-C", SRC, *args], capture_output=True, text=True).stdout.strip()


def dump(o, ind=0):
    """JSON with one hash per line and each id list on one line: compact and diffable."""
    sp = " " * ind
    if isinstance(o, dict):
        if not o:
            return "{}"
        items = [sp + " " + json.dumps(k) + ": " + dump(v, ind + 1) for k, v in o.items()]
        return "{\n" + ",\n".join(items) + "\n" + sp + "}"
    if isinstance(o, list) and o and all(isinstance(x, str) and len(x) == 64 for x in o):
        return "[\n" + ",\n".join(sp + " " + json.dumps(x) for x in o) + "\n" + sp + "]"
    return json.dumps(o, separators=(",", ":"))


def targets_of_cpu(binary):
    """(the target dispatch picks on this CPU, every target --simd-target can hold here)."""
    r = subprocess.run([binary, "logits", "--model", os.path.join(SRC, "tests/data/random_pair/target"),
                        "--prompt-ids", "1", "--out", os.devnull, "--simd-target", "?"], capture_output=True, text=True)
    held = r.stderr[r.stderr.rindex("(") + 1:r.stderr.rindex(")")].split(", ")
    r = subprocess.run([binary, "logits", "--model", os.path.join(SRC, "tests/data/random_pair/target"),
                        "--prompt-ids", "1", "--out", os.devnull], capture_output=True, text=True, check=True)
    return json.loads(r.stdout)["simd_target"], held


def cmd_record(a):
    native, held = targets_of_cpu(a.bin)
    targets = a.targets.split(",") if a.targets else [native]
    positions = a.positions_for.split(",") if a.positions_for else targets[:1]
    for t in targets:
        if t not in held:
            raise SystemExit("this CPU cannot hold %s (it holds %s)" % (t, ", ".join(held)))
    prompts = {"demo": demo_prompt(a.bin), "random_pair": random_pair_prompt()}
    ggufs, per_target, lists = None, {}, {}
    for t in targets:
        print("recording %s ..." % t, file=sys.stderr, flush=True)
        t0 = time.time()
        with tempfile.TemporaryDirectory(prefix="golden.") as tmp:
            g, logits, gen, infos = compute(Runner(a.bin, a.threads, tmp, t), prompts, a.jobs)
        if ggufs is not None and g != ggufs:
            raise SystemExit("the converted GGUF files differ between targets: %s vs %s" % (ggufs, g))
        ggufs = g
        cfg_logits, modes_agree = {}, True
        for (m, w, k) in cells():
            c = cell(m, w, k)
            entry = {mode: list_digest(logits[c][mode]) for mode in MODES}
            if t in positions:
                for mode in MODES:
                    lists[entry[mode]] = logits[c][mode]
            modes_agree &= len(set(entry.values())) == 1
            cfg_logits[c] = entry
        # Lossless: every speculative run emits the greedy ids.
        lossless = all(gen[c][k]["ids"] == gen[c]["greedy"] for c in gen for k in gen_keys()[1:])
        per_target[t] = {"reported_as": sorted(infos["simd_target"]), "positions": t in positions,
                         "modes_agree": modes_agree, "spec_equals_greedy": lossless,
                         "logits": cfg_logits,
                         "generate": {c: gen[c] for c in cfg_logits}}
        print("  %s: modes agree %s, speculative == greedy %s, %.0f s" % (t, modes_agree, lossless, time.time() - t0),
              file=sys.stderr, flush=True)
    dirty = git("status", "--porcelain", "--", "src", "CMakeLists.txt", "cmake")
    out = {
        "about": "Golden outputs of tools/golden.py; see tests/data/golden/README.md. Check: tools/golden.py check",
        "recorded_from": git("rev-parse", "HEAD") + (" (src modified)" if dirty else ""),
        "cpu": next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?"),
        "native_target": native,
        "threads": a.threads,
        "settings": {"n_prompt": N_PROMPT, "chunk_size": CHUNK, "verify_rows": VERIFY_ROWS,
                     "verify_prefix": VERIFY_PREFIX, "gen_prompt": GEN_PROMPT, "gen_tokens": GEN_TOKENS,
                     "block_sizes": BLOCK_SIZES, "weights": WEIGHTS, "kv": KV, "modes": MODES,
                     "models": {m: v[0] for m, v in MODELS.items()}},
        "prompts": prompts,
        "gguf_sha256": ggufs,
        "targets": per_target,
        "logits_row_sha256": {d: lists[d] for d in sorted(lists)},
    }
    os.makedirs(os.path.dirname(a.golden), exist_ok=True)
    with open(a.golden, "w") as f:
        f.write(dump(out) + "\n")
    print("recorded %s: %d cells, %d distinct hash lists stored -> %s (%d bytes)" %
          (",".join(targets), len(cells()), len(lists), a.golden, os.path.getsize(a.golden)))


def first_diffs(want, got, n=5):
    d = [i for i in range(max(len(want), len(got))) if i >= len(want) or i >= len(got) or want[i] != got[i]]
    return d, ", ".join(str(i) for i in d[:n]) + (" ..." if len(d) > n else "")


def cmd_check(a):
    g = json.load(open(a.golden))
    recorded = list(g["targets"])
    native, held = targets_of_cpu(a.bin)
    if a.simd_target in ("all", "others"):
        targets = [t for t in recorded if t in held and (a.simd_target == "all" or t != native)]
    elif a.simd_target:
        targets = a.simd_target.split(",")
    elif native in recorded:
        targets = [native]
    else:  # e.g. an Arm CPU: the portable target, held
        targets = [t for t in ("EMU128",) if t in recorded and t in held]
        print("no goldens for this CPU's target %s (recorded: %s); checking %s" %
              (native, ", ".join(recorded), ", ".join(targets) or "nothing"), flush=True)
    modes = a.modes.split(",") if a.modes else MODES
    passed, failed = 0, 0

    def report(name, ok, detail=""):
        nonlocal passed, failed
        print(("PASS " if ok else "FAIL ") + name + ("" if ok else ": " + detail), flush=True)
        if ok:
            passed += 1
        else:
            failed += 1

    for t in targets:
        if t not in recorded or t not in held:
            report("target " + t, False, "not recorded" if t not in recorded else "this CPU cannot run it")
            continue
        want_t = g["targets"][t]
        t0 = time.time()
        with tempfile.TemporaryDirectory(prefix="golden.") as tmp:
            # The target dispatch picks itself runs unheld, as users run it.
            runner = Runner(a.bin, a.threads, tmp, None if t == native else t)
            ggufs, logits, gen, infos = compute(runner, g["prompts"], a.jobs, a.only, False, modes, not a.no_generate)
        print("[%s] ran the matrix in %.1f s (dispatch %s%s, %d threads, %d jobs)" %
              (t, time.time() - t0, ",".join(sorted(infos.get("simd_target", []))),
               "" if t == native else " held", a.threads, a.jobs), flush=True)
        for name, want in g["gguf_sha256"].items():
            report("[%s] gguf %s" % (t, name), ggufs.get(name) == want,
                   "sha256 %s, recorded %s" % (ggufs.get(name), want))
        for c in sorted(logits):
            want_cell = want_t["logits"].get(c)
            for mode in modes:
                name = "[%s] logits %s %s" % (t, c, mode)
                if want_cell is None:
                    report(name, False, "not recorded")
                    continue
                got = logits[c][mode]
                want = g["logits_row_sha256"].get(want_cell[mode])
                if want is None:  # a target recorded without per-position hashes
                    report(name, list_digest(got) == want_cell[mode],
                           "the per-position hashes differ (their digest %s, recorded %s; positions not stored "
                           "for this target)" % (list_digest(got), want_cell[mode]))
                    continue
                d, s = first_diffs(want, got)
                report(name, not d, "%d of %d positions differ (first: %s)" % (len(d), len(want), s))
        for c in sorted(gen):
            want_cell = want_t["generate"].get(c, {})
            for key in gen_keys():
                name = "[%s] generate %s %s" % (t, c, key)
                want, got = want_cell.get(key), gen[c][key]
                if want is None:
                    report(name, False, "not recorded")
                    continue
                if key == "greedy":
                    d, s = first_diffs(want, got)
                    report(name, not d, "ids differ at %s: recorded %s, got %s" % (s, want, got))
                    continue
                d, s = first_diffs(want["ids"], got["ids"])
                d2, s2 = first_diffs(want["accept_lens"], got["accept_lens"])
                report(name, not d and not d2,
                       ("ids differ at %s: recorded %s, got %s; " % (s, want["ids"], got["ids"]) if d else "") +
                       ("accept_lens differ at step %s: recorded %s, got %s" %
                        (s2, want["accept_lens"], got["accept_lens"]) if d2 else ""))
        if not a.only:
            missing = [c for c in want_t["logits"] if c not in logits]
            report("[%s] the matrix covers every recorded cell" % t, not missing, "not run: %s" % missing)
    print("golden: %d passed, %d failed" % (passed, failed))
    return passed, failed


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("command", choices=["record", "check"])
    p.add_argument("--bin", default=os.environ.get("DFLASH_BIN") or os.path.join(SRC, "build", "dflash"))
    p.add_argument("--golden", default=GOLDEN)
    p.add_argument("--threads", type=int, default=2, help="--threads of each dflash run")
    p.add_argument("--jobs", type=int, default=1, help="dflash runs at once")
    p.add_argument("--simd-target", help="check: the recorded Highway targets to check, comma-separated, all "
                   "(those this CPU runs) or others (all but the one dispatch picks); default: the one dispatch "
                   "picks here (EMU128, held, where that one has no goldens)")
    p.add_argument("--modes", help="check: only these logits modes, comma-separated (default: all three)")
    p.add_argument("--no-generate", action="store_true", help="check: leave out the generation runs")
    p.add_argument("--targets", help="record: the targets to record, comma-separated (default: the one dispatch "
                   "picks here)")
    p.add_argument("--positions-for", help="record: the targets whose per-position hashes are stored (default: the "
                   "first); the others keep one digest per list")
    p.add_argument("--only", help="check: only the cells whose name contains one of these comma-separated "
                   "strings (e.g. demo/w-q4,random_pair/w-f32/kv-q8)")
    return p.parse_args(argv)


def main(argv=None):
    a = parse_args(argv)
    if a.command == "record":
        cmd_record(a)
        return 0
    passed, failed = cmd_check(a)
    return 1 if failed or not passed else 0


if __name__ == "__main__":
    sys.exit(main())
