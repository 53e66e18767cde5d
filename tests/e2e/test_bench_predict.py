#!/usr/bin/python3
"""`dflash bench --draft ... --predict-shapes`: the measured costs of a real shape (here the
`tiny` one, random weights) turn the run's tau into a predicted speedup. Checks the JSON: one
entry per shape and block size, positive verify and draft costs measured relative to one
target forward, and each prediction equal to tau / (verify + draft) with the tau the same run measured for that regime;
with --draft2 (a DFlash2 draft), its own tau on the same costs as well.
A shape the bench does not know is a clear error. `--controller both` measures each block
size with the controller off and on, labelled in the JSON.
"""
import json
import math
import os
import subprocess
import tempfile

from harness import BIN, SRC, check, finish  # noqa: E402
PAIR = os.path.join(SRC, "tests", "data", "random_pair")
DRAFT2 = os.path.join(SRC, "tests", "data", "random_pair2", "draft")


def bench(prompts, extra):
    cmd = [BIN, "bench", "--model", os.path.join(PAIR, "target"), "--draft", os.path.join(PAIR, "draft"),
           "--prompts", prompts, "--block-sizes", "2,4", "--n-prompts", "2", "--bench-gen-tokens", "24",
           "--rounds", "1", "--threads", "2", "--json"] + extra
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600)


def main():
    with tempfile.TemporaryDirectory() as tmp:
        prompts = os.path.join(tmp, "prompts.json")
        with open(prompts, "w") as f:
            json.dump({"code": ["def f(x):", "Write a loop."]}, f)
        r = bench(prompts, ["--predict-shapes", "tiny", "--predict-draft-layers", "1", "--draft2", DRAFT2])
        check("bench exits 0", r.returncode == 0, r.stderr[-2000:])
        if r.returncode != 0:
            return
        # --json: stdout is the document alone, the tables went to stderr.
        try:
            doc = json.loads(r.stdout)
        except ValueError:
            doc = {}
        check("--json: stdout is one JSON document; the tables are on stderr",
              doc.get("regimes") and "predicted speedup" in r.stderr, r.stdout[:300])
        shapes = doc.get("predicted_shapes", [])
        check("one predicted shape", len(shapes) == 1 and shapes[0]["shape"] == "tiny", str(shapes)[:300])
        if not shapes:
            return
        sh = shapes[0]
        check("forward of one row measured", sh["forward1_ms"] > 0, str(sh["forward1_ms"]))
        check("draft has the asked layers and the formula's tap", sh["draft_layers"] == 1 and
              sh["target_layer_ids"] == [1], str(sh["target_layer_ids"]))
        taus = {row["regime"]: {b: v["tau"] for b, v in row["dflash"].items()} for row in doc["regimes"]}
        taus2 = {row["regime"]: {b: v["tau"] for b, v in row["draft2"].items()} for row in doc["regimes"]}
        for B in ("2", "4"):
            b = sh["blocks"].get(B)
            check(f"B={B} present", b is not None)
            if b is None:
                continue
            v, d = b["verify_ratio"], b["draft_ratio"]
            check(f"B={B} costs positive and finite", all(math.isfinite(x) and x > 0 for x in (v, d)), f"{v} {d}")
            for regime, p in b["predicted"].items():
                want = taus[regime][B] / (v + d)
                check(f"B={B} {regime} prediction is tau / (verify + draft)",
                      p["tau"] == taus[regime][B] and abs(p["speedup"] - want) < 1e-9 * max(1.0, want),
                      f"{p} vs {want}")
            check(f"B={B} has a prediction per regime for --draft2",
                  set(b.get("predicted_draft2", {})) == set(taus2), str(b.get("predicted_draft2"))[:300])
            for regime, p in b.get("predicted_draft2", {}).items():
                want = taus2[regime][B] / (v + d)
                check(f"B={B} {regime} draft2 prediction is its tau / (verify + draft)",
                      p["tau"] == taus2[regime][B] and abs(p["speedup"] - want) < 1e-9 * max(1.0, want),
                      f"{p} vs {want}")
        # --controller both: every block size measured with the controller off and on, on the
        # same prompts; off means every step drafts B - 1 (so tau counts whole steps), and the
        # controller's steps may be plain ones.
        both = bench(prompts, ["--controller", "both"])
        check("--controller both exits 0", both.returncode == 0, both.stderr[-2000:])
        if both.returncode == 0:
            d2 = json.loads(both.stdout)
            for row in d2["regimes"]:
                fx, ct = row.get("dflash_fixed", {}), row.get("dflash_controller", {})
                check(f"{row['regime']}: both modes per block size", set(fx) == {"2", "4"} and set(ct) == {"2", "4"},
                      str(row)[:300])
                check(f"{row['regime']}: modes labelled, the first one is 'dflash'",
                      all(not v["controller"] for v in fx.values()) and all(v["controller"] for v in ct.values())
                      and all({k: x for k, x in row["dflash"][b].items() if k != "predicted_speedup"} == v
                              for b, v in fx.items()), str(row)[:300])
                check(f"{row['regime']}: fixed blocks draft B - 1 every step",
                      all(v["steps"] > 0 and 0 < v["tau"] <= int(b) for b, v in fx.items()), str(fx)[:300])
            check("the table labels the controller line", "controller:" in both.stderr, both.stderr[-1500:])
        bad = bench(prompts, ["--predict-shapes", "no-such-shape"])
        check("unknown shape is refused", bad.returncode != 0 and "unknown shape" in bad.stderr, bad.stderr[-500:])


main()
finish()
