#!/usr/bin/python3
"""Writes models/demo/bench_prompts.json: held-out prompts for `dflash bench --draft`.

code: chat prompts asking for functions from held-out standard-library files (the demo
target never saw those files). long_context: a held-out source file as context followed by an
edit instruction. Deterministic: same files, same order, every time.
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__)))
import corpus  # noqa: E402

OUT = os.path.join(os.path.dirname(__file__), "..", "..", "models", "demo", "bench_prompts.json")


def main():
    chats = corpus.chat_samples("heldout")
    code = [p for p, _ in chats[:24]]
    files = [rel for rel, held in corpus.corpus_files() if held]
    long_ctx = []
    for rel in files:
        src = corpus.read_source(rel)
        if len(src) < 20000:
            continue
        long_ctx.append({"context": src[:40000], "instruction":
                         f"Rewrite the first function in the code above from {rel} with clearer names."})
        if len(long_ctx) == 4:
            break
    with open(OUT, "w") as f:
        json.dump({"code": code, "long_context": long_ctx}, f, indent=1, ensure_ascii=False)
    print(f"{OUT}: {len(code)} code prompts, {len(long_ctx)} long-context prompts")


if __name__ == "__main__":
    main()
