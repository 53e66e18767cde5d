#!/usr/bin/python3
"""`dflash bench --concurrency`: on the shipped dense demo pair it measures 1, 2 and 4 streams at
once, plain and speculative, through the batcher the server uses (--parallel), and prints the
table and, with --json, a document whose counts add up (every stream generated its tokens, the
wall time covers the slowest stream). With --vs-llamacpp on a GGUF of the demo target it runs
llama.cpp's batched sequences (node-llama-cpp) on the same prompt ids beside it. An HF folder
with --vs-llamacpp, and a level of 0, end with a message and a non-zero exit. The speeds
themselves are not asserted (timings), only that they are measured."""
import json
import math
import os
import statistics
import subprocess
import tempfile

from harness import BIN, SRC, check, finish  # noqa: E402

TARGET = os.path.join(SRC, "models", "demo", "target")
DRAFT = os.path.join(SRC, "models", "demo", "draft2")
PROMPTS = os.path.join(SRC, "models", "demo", "bench_prompts.json")
GEN = 16


def run(args, timeout=600):
    return subprocess.run([BIN, "bench", *args], capture_output=True, text=True, timeout=timeout)


def doc_of(out):
    return json.loads(out[out.index("\n{") + 1:]) if "\n{" in out else (json.loads(out) if out.startswith("{") else {})


def check_levels(doc, engines):
    levels = doc.get("levels", [])
    check("levels 1, 2, 4", [lv.get("streams") for lv in levels] == [1, 2, 4], json.dumps(levels)[:500])
    for lv in levels:
        c = lv.get("streams", 0)
        for e in engines:
            m = lv.get(e, {})
            ok = (m.get("tokens") == c * GEN and m.get("aggregate_tok_s", 0) > 0 and math.isfinite(m["aggregate_tok_s"])
                  and 0 < m.get("latency_p50_s", 0) <= m.get("latency_max_s", 0) <= m.get("wall_s", 0) * 1.001
                  and 0 < m.get("latency_mean_s", 0) <= m.get("latency_max_s", 0))
            check(f"{c} streams, {e}: {c} x {GEN} tokens, tok/s > 0, p50 <= max <= wall, 0 < mean <= max", ok,
                  json.dumps(m))
            # The window while all streams decode: inside the wall time, fewer tokens than all
            # (each stream's first token comes before it), at least one per stream's later step.
            # One stream: from its first token to its last, so exactly GEN - 1 tokens. Several:
            # the demo's passes take a fraction of a millisecond, so one stream may finish before
            # another starts (seen: 2 plain streams that never shared a pass): then no window.
            window = (0 < m.get("steady_s", 0) <= m.get("wall_s", 0) and c <= m.get("steady_tokens", 0) < c * GEN
                      and abs(m.get("steady_tok_s", 0) - m["steady_tokens"] / m["steady_s"]) < 1e-6 * m["steady_tok_s"])
            if c == 1:
                check(f"1 stream, {e}: the all-decoding window runs from the first token to the last: {GEN - 1} tokens",
                      window and m["steady_tokens"] == GEN - 1, json.dumps(m))
            else:
                none = m.get("steady_s", -1) == 0 and m.get("steady_tokens", -1) == 0 == m.get("steady_tok_s")
                check(f"{c} streams, {e}: the all-decoding window lies in the wall time, {c} <= its tokens < {c * GEN} "
                      "(or there is none)", window or none, json.dumps(m))


# --no-adaptive: every step drafts a full block, so every level's speculative row has drafts.
# Two rounds: the median of an even count is the mean of the middle two (not the upper one),
# and no interval of it reaches 90%.
r = run(["--model", TARGET, "--draft", DRAFT, "--prompts", PROMPTS, "--concurrency", "1,2,4", "--gen-tokens", str(GEN),
         "--threads", "2", "--json", "--no-adaptive", "--rounds", "2"])
check("bench --concurrency exits 0", r.returncode == 0, r.stderr[-2000:])
doc = doc_of(r.stdout)
check("a JSON document", doc.get("bench") == "concurrency", r.stdout[-1000:])
check_levels(doc, ["plain", "dflash"])

def paired_ok(lv, rounds):
    p = lv.get("dflash_over_plain_paired", [])
    m = lv.get("dflash_over_plain_paired_median", 0)
    return (len(p) == rounds and all(x > 0 and math.isfinite(x) for x in p)
            and math.isclose(m, statistics.median(p), rel_tol=1e-9))


check("each level has one paired dflash/plain ratio per round (the document's 2 rounds), and their median",
      doc.get("rounds", 0) == 2 and all(paired_ok(lv, doc["rounds"]) for lv in doc.get("levels", [])),
      json.dumps(doc.get("levels", []))[:800])
check("the all-decoding tok/s: each level's best round per mode, a paired ratio per round, drafts per round",
      all(lv.get("plain_steady_tok_s_best", -1) >= lv["plain"]["steady_tok_s"] >= 0
          and lv.get("dflash_steady_tok_s_best", -1) >= lv["dflash"]["steady_tok_s"] >= 0
          and len(lv.get("dflash_over_plain_steady_paired", [])) <= doc["rounds"]  # rounds where both had a window
          and all(x > 0 for x in lv.get("dflash_over_plain_steady_paired", [0]))
          and lv.get("dflash_drafted_by_round") == [lv["dflash"]["drafted"]] * doc["rounds"]
          for lv in doc.get("levels", [])), json.dumps(doc.get("levels", []))[:800])
check("the scaling paired by round: each level's tok/s over the first level's in the same round, one a round "
      "(the first level's all 1), their median, and no interval of 2 rounds",
      all(len(lv.get("plain_over_first_level_paired", [])) == doc["rounds"]
          and len(lv.get("dflash_over_first_level_paired", [])) == doc["rounds"]
          and all(x > 0 and math.isfinite(x) for x in lv["plain_over_first_level_paired"] + lv["dflash_over_first_level_paired"])
          and math.isclose(lv.get("plain_over_first_level_paired_median", -1),
                           statistics.median(lv["plain_over_first_level_paired"]), rel_tol=1e-9)
          and lv.get("plain_over_first_level_paired_interval", {}).get("coverage", -1) == 0
          for lv in doc.get("levels", []))
      and doc["levels"][0]["plain_over_first_level_paired"] == [1.0, 1.0]
      and doc["levels"][0]["dflash_over_first_level_paired"] == [1.0, 1.0], json.dumps(doc.get("levels", []))[:800])
check("the mean request latency: a paired plain/dflash ratio per round, and their median",
      all(len(lv.get("plain_over_dflash_mean_latency_paired", [])) == doc["rounds"]
          and all(x > 0 and math.isfinite(x) for x in lv["plain_over_dflash_mean_latency_paired"])
          and math.isclose(lv.get("plain_over_dflash_mean_latency_paired_median", -1),
                           statistics.median(lv["plain_over_dflash_mean_latency_paired"]), rel_tol=1e-9)
          for lv in doc.get("levels", [])), json.dumps(doc.get("levels", []))[:800])
check("every speculative row drafted and counted what was accepted (0 <= accepted <= drafted, drafted > 0)",
      all(0 <= lv["dflash"]["accepted"] <= lv["dflash"]["drafted"] and lv["dflash"]["drafted"] > 0
          for lv in doc.get("levels", [])), json.dumps(doc.get("levels", []))[:800])

# --block-sizes B sets the block: at one stream every draft pass is one block of B - 1 drafts.
r = run(["--model", TARGET, "--draft", DRAFT, "--prompts", PROMPTS, "--concurrency", "1", "--gen-tokens", str(GEN),
         "--threads", "2", "--json", "--no-adaptive", "--block-sizes", "3"])
lv = (doc_of(r.stdout).get("levels") or [{}])[0].get("dflash", {})
check("--block-sizes 3: every block drafts 2 tokens (drafted = 2 x draft passes > 0)",
      r.returncode == 0 and lv.get("draft_passes", 0) > 0 and lv.get("drafted") == 2 * lv.get("draft_passes"),
      json.dumps(lv) + r.stderr[-500:])
check("2 rounds: no interval of the paired median reaches 90% (coverage 0)",
      all(lv.get("dflash_over_plain_paired_interval", {}).get("coverage", -1) == 0 for lv in doc.get("levels", [])),
      json.dumps(doc.get("levels", []))[:800])

# Five rounds through one batcher per mode (a server's, warm after the first round): each
# round's passes are counted alone, and the paired median gets an interval from the order
# statistics: of 5 rounds the least and the most, holding the true median with a chance of
# 1 - 2 / 2^5 (a fair coin's five tosses all alike).
r = run(["--model", TARGET, "--draft", DRAFT, "--prompts", PROMPTS, "--concurrency", "1", "--gen-tokens", str(GEN),
         "--threads", "2", "--json", "--rounds", "5"])
lv = (doc_of(r.stdout).get("levels") or [{}])[0]
check("--rounds 5: five paired ratios", r.returncode == 0 and paired_ok(lv, 5), r.stdout[-800:] + r.stderr[-500:])
iv = lv.get("dflash_over_plain_paired_interval", {})
p = sorted(lv.get("dflash_over_plain_paired", [0]))
check("the paired median's interval: the least and the most of 5 rounds, a chance of 93.75%",
      iv.get("low") == p[0] and iv.get("high") == p[-1] and math.isclose(iv.get("coverage", 0), 1 - 2 / 32), json.dumps(lv)[:800])
# One plain stream: a pass for the prompt's chunk, then one a token after the first.
check("a round's passes are its own (the batcher lives on across rounds): one plain stream's are a prompt chunk's "
      f"and {GEN - 1} decode steps'", lv.get("plain", {}).get("passes") == GEN, json.dumps(lv.get("plain", {})))
rounds = lv.get("by_round", [])
# The slot keeps its state across rounds as a server's does, so from the second round on the
# same prompt is a prefix it holds: its prefill is the last prompt row alone.
check("by_round: each of the 5 rounds' two runs, plain first in even rounds; each plain run a prompt chunk's pass and "
      f"{GEN - 1} decode steps', its rows the prompt's and {GEN - 1} in the first round, then 1 and {GEN - 1} "
      "(the prompt a prefix the slot kept); each run's tokens " + str(GEN),
      len(rounds) == 5 and [x.get("first") for x in rounds] == ["plain", "dflash"] * 2 + ["plain"]
      and rounds[0]["plain"]["rows"] > GEN
      and all(x["plain"]["passes"] == GEN and x["plain"]["draft_passes"] == 0 and x["plain"]["drafted"] == 0
              and (i == 0 or x["plain"]["rows"] == GEN) and x["plain"]["tokens"] == GEN
              and x["dflash"]["tokens"] == GEN and 0 <= x["dflash"]["accepted"] <= x["dflash"]["drafted"]
              for i, x in enumerate(rounds)), json.dumps(rounds)[:1500])
r = run(["--model", TARGET, "--draft", DRAFT, "--prompts", PROMPTS, "--concurrency", "1,2", "--gen-tokens", str(GEN),
         "--threads", "2", "--rounds", "5"])
table = r.stdout.split("dflash/plain paired by round")[-1]
check("the table of paired medians and their intervals: a row per level with its chance",
      r.returncode == 0 and "paired by round" in r.stdout
      and sum(1 for line in table.splitlines() if line.split()[:1] in (["1"], ["2"]) and "93.8%" in line) == 2,
      r.stdout[-1500:])
scaling = r.stdout.split("over the first level's (1 stream), paired by round")[-1].split("dflash/plain paired")[0]
check("the table of the scaling paired by round: a row per level with its interval's chance, the first level 1.00x",
      r.returncode == 0 and "each round runs every level" in r.stdout
      and sum(1 for line in scaling.splitlines() if line.split()[:1] in (["1"], ["2"]) and "93.8%" in line) == 2
      and any(line.split()[:2] == ["1", "1.00x"] for line in scaling.splitlines()), r.stdout[-1500:])
check("a progress line a round on stderr (round 5 of 5 the last)", "round 5 of 5 done" in r.stderr, r.stderr[-500:])
# --cache-type with --concurrency: the slots' KV cache (one value), named in the document;
# the default is the server's f32.
check("the document names the slots' KV cache: f32 by default, as dflash serve", doc.get("cache_type") == "f32",
      json.dumps({k: v for k, v in doc.items() if k != "levels"}))
r = run(["--model", TARGET, "--draft", DRAFT, "--prompts", PROMPTS, "--concurrency", "1,2", "--gen-tokens", str(GEN),
         "--threads", "2", "--json", "--cache-type", "f16"])
d16 = doc_of(r.stdout)
check("--cache-type f16 with --concurrency: the slots run an f16 KV cache, every stream its tokens",
      r.returncode == 0 and d16.get("cache_type") == "f16" and "KV cache" not in r.stderr
      and [lv.get("plain", {}).get("tokens") for lv in d16.get("levels", [])] == [GEN, 2 * GEN]
      and [lv.get("dflash", {}).get("tokens") for lv in d16.get("levels", [])] == [GEN, 2 * GEN],
      r.stdout[-800:] + r.stderr[-500:])
r = run(["--model", TARGET, "--prompts", PROMPTS, "--concurrency", "1", "--cache-type", "f16,q8"])
check("--cache-type with two values and --concurrency: exit != 0, one value wanted",
      r.returncode != 0 and "one --cache-type value" in r.stderr, r.stderr[-500:])
r = run(["--model", TARGET, "--prompts", PROMPTS, "--concurrency", "1", "--cache-type", "f17"])
check("--cache-type f17 with --concurrency: exit != 0 naming the type and the ones there are",
      r.returncode != 0 and "'f17'" in r.stderr and "f16" in r.stderr, r.stderr[-500:])
r = run(["--model", TARGET, "--draft", DRAFT, "--prompts", PROMPTS, "--concurrency", "1", "--block-sizes", "4,8"])
check("--block-sizes with two values: exit != 0, one value wanted",
      r.returncode != 0 and "one --block-sizes value" in r.stderr, r.stderr[-500:])

r = run(["--model", TARGET, "--prompts", PROMPTS, "--concurrency", "1,2,4", "--gen-tokens", str(GEN), "--threads", "2"])
tables = r.stdout.split("over the first level's")[0].split("while all streams decode")
check("the tables without a draft: one row per level in each (end to end, then all decoding)", r.returncode == 0 and
      len(tables) == 2 and all(sum(1 for line in t.splitlines() if line.strip().split(" ")[0] in ("1", "2", "4")) == 3
                               for t in tables), r.stdout[-1500:])

r = run(["--model", TARGET, "--prompts", PROMPTS, "--concurrency", "1", "--vs-llamacpp"])
check("--vs-llamacpp with a Hugging Face folder: exit != 0, says a .gguf is needed",
      r.returncode != 0 and ".gguf" in r.stderr, r.stderr[-500:])
r = run(["--model", TARGET, "--prompts", PROMPTS, "--concurrency", "0"])
check("a level of 0: exit != 0 with a message", r.returncode != 0 and "concurrency" in r.stderr, r.stderr[-500:])

with tempfile.TemporaryDirectory() as tmp:
    gguf = os.path.join(tmp, "demo-q8_0.gguf")
    c = subprocess.run([BIN, "convert", "--model", TARGET, "--out", gguf, "--type", "q8_0"], capture_output=True, text=True,
                       timeout=300)
    check("the demo target converts to GGUF", c.returncode == 0, c.stderr[-500:])
    out = os.path.join(tmp, "conc.json")
    r = run(["--model", gguf, "--prompts", PROMPTS, "--concurrency", "1,2,4", "--gen-tokens", str(GEN), "--threads", "2",
             "--json", "--vs-llamacpp", "--json-out", out])
    check("bench --concurrency --vs-llamacpp on the GGUF exits 0", r.returncode == 0, r.stderr[-2000:])
    doc = doc_of(r.stdout)
    saved = json.load(open(out)) if os.path.exists(out) else {}
    svg_path = os.path.join(tmp, "conc.svg")
    svg = open(svg_path).read() if os.path.exists(svg_path) else ""
    check("--json-out writes the document and an SVG beside it with the throughput panel and llama.cpp's line",
          saved.get("levels") == doc.get("levels") and svg.startswith("<?xml") and "aggregate throughput vs streams" in svg
          and ">llama.cpp<" in svg, svg[:300])
    check_levels(doc, ["plain"])
    peer = doc.get("llamacpp", {}).get("levels", [])
    check("llama.cpp measured the same levels", [lv.get("streams") for lv in peer] == [1, 2, 4], json.dumps(peer)[:500])
    check("llama.cpp generated every stream's tokens, tok/s > 0",
          all(lv.get("tokens") == lv.get("streams", 0) * GEN and lv.get("aggregate_tok_s", 0) > 0 for lv in peer),
          json.dumps(peer)[:800])
finish()
