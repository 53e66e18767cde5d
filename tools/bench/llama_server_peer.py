#!/usr/bin/python3
"""llama.cpp's own DFlash (llama-server --spec-type draft-dflash) on a dflash model pair: plain
and speculative tok/s on the bench prompts, greedy, for side-by-side figures with
`dflash bench --draft`.

  llama_server_peer.py --server PATH/llama-server --model TARGET_DIR --draft DRAFT_DIR
      [--type q4_0] [--n-max 4 7] [--n-prompts 2] [--n-predict 128] [--threads 2]
      [--prompts models/demo/bench_prompts.json] [--work DIR] [--json-out F]

The pair is converted into --work (a temp dir by default, removed after): the target with
`dflash convert --type TYPE` (a target given as a .gguf file is used as it is), the draft with tools/draft_gguf.py (--target copies the target's
tokenizer keys; matrices as TYPE where TYPE is q4_0 or q8_0). llama-server is started on
loopback once plain and once per --n-max (its draft length: the block is n_max + 1 tokens, so
dflash's block size B corresponds to --n-max B-1; llama.cpp clamps n_max to the draft's
block_size - 1), with -t/-td THREADS, -lm none (no mmap), one slot, and the same prompts
(the code regime's chat prompts, as `dflash bench` formats them, thinking off) at temperature 0
with prompt caching off. tok/s is the sum of `timings.predicted_n` over the sum of
`timings.predicted_ms` (decode only, as dflash bench's figure); acceptance is
draft_n_accepted / draft_n. The llama-server binary is the user's (llama.cpp's source ships in
node-llama-cpp's gitRelease.bundle; docs/ say how to build it outside this repository); this
script never builds it.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

SRC = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(SRC, "tools"))


def chat(q):
    return "<|im_start|>user\n" + q + "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"


def post(url, body, timeout=1800):
    req = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    return json.loads(urllib.request.urlopen(req, timeout=timeout).read())


def serve_and_measure(a, target, draft, n_max, prompts, log_path):
    cmd = [a.server, "-m", target, "-t", str(a.threads), "-lm", "none", "--host", "127.0.0.1",
           "--port", str(a.port), "-c", str(a.ctx), "-np", "1", "--no-webui"]
    if draft:
        cmd += ["-md", draft, "--spec-type", "draft-dflash", "--spec-draft-n-max", str(n_max),
                "-td", str(a.threads)]
    url = f"http://127.0.0.1:{a.port}"
    with open(log_path, "w") as log:
        p = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        try:
            t_end = time.time() + 600
            while True:
                if p.poll() is not None:
                    tail = open(log_path, errors="replace").read()[-1500:]
                    raise RuntimeError(f"llama-server exited ({p.returncode}): {' '.join(cmd)}\n{tail}")
                try:
                    if urllib.request.urlopen(url + "/health", timeout=2).status == 200:
                        break
                except Exception:
                    pass
                if time.time() > t_end:
                    raise RuntimeError("llama-server did not become ready in 600 s")
                time.sleep(0.5)
            n = dn = da = 0
            ms = 0.0
            texts = []
            for q in prompts:
                r = post(url + "/completion", {"prompt": chat(q), "n_predict": a.n_predict, "temperature": 0,
                                               "cache_prompt": False})
                t = r["timings"]
                n += t["predicted_n"]
                ms += t["predicted_ms"]
                dn += t.get("draft_n", 0)
                da += t.get("draft_n_accepted", 0)
                texts.append(r.get("content", ""))
            return {"n_max": n_max if draft else 0, "tok_s": 1e3 * n / ms if ms else 0.0, "predicted_n": n,
                    "draft_n": dn, "draft_n_accepted": da, "accept_rate": da / dn if dn else None,
                    "loadavg": open("/proc/loadavg").read().split()[:3], "texts": texts}
        finally:
            p.terminate()
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--server", required=True, help="path of a llama-server binary")
    ap.add_argument("--model", required=True, help="target folder (Hugging Face) or .gguf file")
    ap.add_argument("--draft", required=True, help="DFlash or DFlash2 draft folder")
    ap.add_argument("--type", default="q4_0", choices=["q4_0", "q8_0", "bf16"])
    ap.add_argument("--n-max", type=int, nargs="+", default=[4, 7])
    ap.add_argument("--n-prompts", type=int, default=2)
    ap.add_argument("--n-predict", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--ctx", type=int, default=2048)
    ap.add_argument("--port", type=int, default=18431)
    ap.add_argument("--prompts", default=os.path.join(SRC, "models", "demo", "bench_prompts.json"))
    ap.add_argument("--work", help="keep the GGUF files and server logs here")
    ap.add_argument("--json-out")
    a = ap.parse_args(argv)
    if not (os.path.isfile(a.server) and os.access(a.server, os.X_OK)):
        sys.exit(f"llama_server_peer.py: --server {a.server}: not an executable file (a llama-server binary)")
    from draft_gguf import write_draft_gguf  # noqa: E402  (torch: imported only when run)
    dflash = os.environ.get("DFLASH_BIN") or os.path.join(SRC, "build", "dflash")
    work = a.work or tempfile.mkdtemp(prefix="dflash_llama_server_")
    os.makedirs(work, exist_ok=True)
    try:
        target = a.model if a.model.endswith(".gguf") else os.path.join(work, f"target-{a.type}.gguf")
        draft = os.path.join(work, f"draft-{a.type}.gguf")
        if not os.path.exists(target):
            subprocess.run([dflash, "convert", "--model", a.model, "--out", target, "--type", a.type], check=True,
                           stdout=subprocess.DEVNULL)
        if not os.path.exists(draft):
            write_draft_gguf(a.draft, draft, matrices=a.type if a.type in ("q4_0", "q8_0") else "same",
                             target_gguf=target)
        prompts = json.load(open(a.prompts))["code"][:a.n_prompts]
        runs = [serve_and_measure(a, target, None, 0, prompts, os.path.join(work, "server-plain.log"))]
        for n in a.n_max:
            runs.append(serve_and_measure(a, target, draft, n, prompts, os.path.join(work, f"server-n{n}.log")))
        plain = runs[0]["tok_s"]
        print(f"llama-server ({a.type}, {a.threads} threads, {len(prompts)} code prompts x {a.n_predict} tokens)")
        print(f"{'mode':<14} {'tok/s':>8} {'speedup':>8} {'accept':>8} {'same text':>10}  load")
        for r in runs:
            name = "plain" if r["n_max"] == 0 else f"dflash n_max={r['n_max']}"
            acc = f"{100 * r['accept_rate']:.1f}%" if r["accept_rate"] is not None else "-"
            same = "yes" if r["texts"] == runs[0]["texts"] else "NO"
            print(f"{name:<14} {r['tok_s']:8.2f} {r['tok_s'] / plain if plain else 0:7.2f}x {acc:>8} {same:>10}  "
                  + " ".join(r["loadavg"]))
        doc = {"engine": "llama-server", "server": a.server, "type": a.type, "threads": a.threads, "runs": runs}
        if a.json_out:
            with open(a.json_out, "w") as f:
                json.dump(doc, f, indent=1)
    finally:
        if not a.work:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
