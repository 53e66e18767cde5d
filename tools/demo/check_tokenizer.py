#!/usr/bin/python3
"""Check corpus.Tokenizer against the JS oracle (@huggingface/tokenizers) on every held-out
file, a sample of training files, held-out chat renders and some edge cases; also checks
that decode(encode(s)) == NFC(s).
  /usr/bin/python3 tools/demo/check_tokenizer.py [--dir models/demo/target] [--all]"""
import argparse, json, os, subprocess, sys, unicodedata
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import corpus  # noqa: E402

EDGE = ["Hello world, def foo(x): return x**2 🤖", "e\u0301", "it's THEY'LL we'Re",
        "a\r\nb\n\n\n  c\t\t\n", "   leading and trailing   ", "x = 12345678 + 3.14e-10",
        "Привет мир 你好世界 ｆｕｌｌ", "<|im_start|>user\nhi<|im_end|>\n<think>\n\n</think>\n\n",
        "<|endoftext|><|im_end|>", "\u00a0nbsp\u2003em", "tab\tsep\vvt\fff", ""]

ap = argparse.ArgumentParser()
ap.add_argument("--dir", default=os.path.join(corpus.REPO, "models/demo/target"))
ap.add_argument("--all", action="store_true", help="every training file too (slow)")
args = ap.parse_args()
tok = corpus.Tokenizer(os.path.join(args.dir, "tokenizer.json"))
texts = list(EDGE)
files = corpus.corpus_files()
for i, (rel, held) in enumerate(files):
    if held or args.all or i % 10 == 0:
        texts.append(corpus.read_source(rel))
texts += [corpus.render_chat(p, a) for p, a in corpus.chat_samples("heldout")]
texts += [corpus.render_chat(p) for p, a in corpus.chat_samples("heldout")[:20]]
inp = "\n".join(json.dumps(t) for t in texts) + "\n"
r = subprocess.run(["node", os.path.join(os.path.dirname(__file__), "oracle_encode.mjs"),
                    args.dir], input=inp, capture_output=True, text=True, check=True,
                   cwd=corpus.REPO)


oracle = [json.loads(l) for l in r.stdout.splitlines() if l]
assert len(oracle) == len(texts), (len(oracle), len(texts))
bad = ntok = nbytes = 0
for t, o in zip(texts, oracle):
    mine = tok.encode(t)
    ntok += len(mine); nbytes += len(t.encode())
    if mine != o:
        bad += 1
        k = next(i for i in range(min(len(mine), len(o))) if mine[i] != o[i]) if mine[:len(o)] != o[:len(mine)] else min(len(mine), len(o))
        print("MISMATCH at token", k, repr(tok.decode(mine[max(0, k - 5):k + 5])), mine[k:k+5], o[k:k+5])
    if tok.decode(mine) != unicodedata.normalize("NFC", t):
        bad += 1
        print("ROUNDTRIP FAIL", repr(t[:80]))
print(f"{len(texts)} texts, {nbytes} bytes, {ntok} tokens ({nbytes / ntok:.2f} bytes/token), "
      f"{bad} disagreements")
sys.exit(1 if bad else 0)
