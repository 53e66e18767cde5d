#!/usr/bin/python3
"""Data pipeline for the shipped demo models (target now, DFlash draft later).

Everything here is deterministic: files are listed in sorted order, the held-out split is a
hash of the file's relative path (stable when files are added or removed), chat samples are
drawn with a fixed seed.

Public functions:
  corpus_files()                -> [(relpath, is_heldout)]
  read_source(relpath)          -> NFC text of one file
  chat_samples(split)           -> [(prompt_text, answer_text)] for "train" / "heldout"
  render_chat(prompt, answer)   -> Qwen3 chat-format string (what the chat template renders)
  Tokenizer(path)               -> byte-level BPE encoder matching Hugging Face's tokenizer.json
  token_streams(tok_dir)        -> dict of numpy int32 arrays (cached under out/demo/)
"""
import ast
import hashlib
import json
import os
import random
import re
import sys
import textwrap
import unicodedata

STDLIB = "/usr/lib/python3.11"
# Packages taken besides the top-level modules. Left out on purpose: encodings (codec
# tables), lib2to3/distutils (legacy), pydoc_data (a 700 KB string), test suites.
PACKAGES = ["asyncio", "collections", "concurrent", "ctypes", "curses", "dbm", "email",
            "html", "http", "importlib", "json", "logging", "multiprocessing", "re",
            "sqlite3", "tomllib", "unittest", "urllib", "venv", "wsgiref", "xml", "xmlrpc",
            "zoneinfo"]
MAX_FILE_BYTES = 150_000          # drops _pydecimal.py (230 KB), a near-copy of decimal docs
SKIP_DIRS = {"test", "tests", "idle_test", "__pycache__"}
HELDOUT_MOD = 20                   # ~5% of files held out for evaluation

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CACHE_DIR = os.path.join(REPO, "out", "demo")   # ignored by git

SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]   # special: true
NONSPECIAL = ["<think>", "</think>"]                         # added, special: false
ADDED_TOKENS = SPECIAL + NONSPECIAL


def is_heldout(relpath):
    return int(hashlib.sha1(relpath.encode()).hexdigest(), 16) % HELDOUT_MOD == 0


def corpus_files():
    rels = []
    for name in sorted(os.listdir(STDLIB)):
        if name.endswith(".py") and not name.startswith("_sysconfigdata"):
            rels.append(name)
    for pkg in PACKAGES:
        for root, dirs, files in os.walk(os.path.join(STDLIB, pkg)):
            dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS)
            for f in sorted(files):
                if f.endswith(".py"):
                    rels.append(os.path.relpath(os.path.join(root, f), STDLIB))
    out = []
    for r in sorted(rels):
        if os.path.getsize(os.path.join(STDLIB, r)) <= MAX_FILE_BYTES:
            out.append((r, is_heldout(r)))
    return out


def read_source(relpath):
    with open(os.path.join(STDLIB, relpath), encoding="utf-8") as f:
        return unicodedata.normalize("NFC", f.read())


# ---------------------------------------------------------------------------------------
# Pre-tokenizer: the Qwen2/Qwen3 Split regex
#   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|
#   \s*[\r\n]+|\s+(?!\S)|\s+
# Python's re has no \p{..}; we spell \p{L}, \p{N} as explicit code point ranges built from
# unicodedata, and \s as Unicode White_Space (what Rust/Oniguruma use; Python's own \s also
# matches U+001C..U+001F, which would differ).
def _ranges(pred):
    parts, start, prev = [], None, None
    for cp in range(sys.maxunicode + 1):
        if pred(cp):
            if start is None:
                start = cp
            prev = cp
        elif start is not None:
            parts.append((start, prev))
            start = None
    if start is not None:
        parts.append((start, prev))
    esc = lambda c: "\\U%08x" % c
    return "".join(esc(a) if a == b else esc(a) + "-" + esc(b) for a, b in parts)


_WHITE_SPACE = [0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x20, 0x85, 0xA0, 0x1680] + \
    list(range(0x2000, 0x200B)) + [0x2028, 0x2029, 0x202F, 0x205F, 0x3000]


def build_pretokenize_regex():
    cat = unicodedata.category
    L = _ranges(lambda c: cat(chr(c)) in ("Lu", "Ll", "Lt", "Lm", "Lo"))
    N = _ranges(lambda c: cat(chr(c)) in ("Nd", "Nl", "No"))
    S = "".join("\\U%08x" % c for c in _WHITE_SPACE)
    pat = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)"
           rf"|[^\r\n{L}{N}]?[{L}]+"
           rf"|[{N}]"
           rf"| ?[^{S}{L}{N}]+[\r\n]*"
           rf"|[{S}]*[\r\n]+"
           rf"|[{S}]+(?![^{S}])"
           rf"|[{S}]+")
    return re.compile(pat)


HF_SPLIT_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
                  r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")


def bytes_to_unicode():
    """GPT-2's byte <-> printable-char map used by the ByteLevel pre-tokenizer/decoder."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


BYTE_CHARS = bytes_to_unicode()

_ADDED_RE = re.compile("|".join(re.escape(t) for t in sorted(ADDED_TOKENS, key=len,
                                                                reverse=True)))


def split_added(text):
    """Split text around added tokens the way HF does before normalization:
    yields (is_added, piece)."""
    pos = 0
    for m in _ADDED_RE.finditer(text):
        if m.start() > pos:
            yield False, text[pos:m.start()]
        yield True, m.group()
        pos = m.end()
    if pos < len(text):
        yield False, text[pos:]


_PRE_RE = None


def pretokenize(text):
    """NFC + Split regex + ByteLevel mapping: the list of byte-level 'words'."""
    global _PRE_RE
    if _PRE_RE is None:
        _PRE_RE = build_pretokenize_regex()
    text = unicodedata.normalize("NFC", text)
    return ["".join(BYTE_CHARS[b] for b in w.encode("utf-8")) for w in _PRE_RE.findall(text)]


class Tokenizer:
    """Encoder/decoder for the tokenizer.json written by train_tokenizer.py."""

    def __init__(self, path):
        with open(path, encoding="utf-8") as f:
            tj = json.load(f)
        self.vocab = tj["model"]["vocab"]
        self.ranks = {tuple(m): i for i, m in enumerate(tj["model"]["merges"])}
        self.added = {a["content"]: a["id"] for a in tj["added_tokens"]}
        self.id_to_tok = {i: t for t, i in self.vocab.items()}
        self.id_to_tok.update({i: t for t, i in self.added.items()})
        self.byte_dec = {c: b for b, c in BYTE_CHARS.items()}
        self.cache = {}

    def bpe(self, word):
        ids = self.cache.get(word)
        if ids is not None:
            return ids
        syms = list(word)
        while len(syms) > 1:
            best, bi = None, -1
            for i in range(len(syms) - 1):
                r = self.ranks.get((syms[i], syms[i + 1]))
                if r is not None and (best is None or r < best):
                    best, bi = r, i
            if best is None:
                break
            a, b = syms[bi], syms[bi + 1]
            out, i = [], 0
            while i < len(syms):       # merge every occurrence, left to right
                if i < len(syms) - 1 and syms[i] == a and syms[i + 1] == b:
                    out.append(a + b)
                    i += 2
                else:
                    out.append(syms[i])
                    i += 1
            syms = out
        ids = [self.vocab[s] for s in syms]
        self.cache[word] = ids
        return ids

    def encode(self, text):
        ids = []
        for is_added, piece in split_added(text):
            if is_added:
                ids.append(self.added[piece])
            else:
                for w in pretokenize(piece):
                    ids.extend(self.bpe(w))
        return ids

    def decode(self, ids):
        out, buf = [], []
        for i in ids:
            t = self.id_to_tok.get(int(i), "")
            if t in self.added:
                out.append(bytes(buf).decode("utf-8", "replace"))
                buf = []
                out.append(t)
            else:
                buf.extend(self.byte_dec[c] for c in t)
        out.append(bytes(buf).decode("utf-8", "replace"))
        return "".join(out)


# ---------------------------------------------------------------------------------------
# Chat part: conversations synthesized from the stdlib with ast.
PROMPTS_FUNC = [
    "Write a Python function `{name}` from the `{mod}` module.",
    "Show me the source of `{mod}.{name}`.",
    "Implement `{name}` in Python: {doc}",
    "Write a function that does this: {doc}",
]
PROMPTS_METHOD = [
    "Write the method `{cls}.{name}` from the `{mod}` module.",
    "Show the `{name}` method of the `{cls}` class in `{mod}`.",
    "Implement `{cls}.{name}`: {doc}",
]
PROMPTS_CLASS = [
    "Show the class `{name}` from the `{mod}` module.",
    "Write a Python class `{name}`: {doc}",
    "Implement the `{mod}.{name}` class.",
]
MAX_ANSWER_CHARS = 2400    # keeps most answers inside a 1024-token window


def _first_doc_line(node):
    doc = ast.get_docstring(node)
    if not doc:
        return None
    line = doc.strip().split("\n")[0].strip()
    return line if 8 <= len(line) <= 200 else None


def _module_name(relpath):
    mod = relpath[:-3].replace("/", ".")
    return mod[:-9] if mod.endswith(".__init__") else mod


def chat_samples(split, seed=1234):
    """[(prompt, answer)] from functions, methods and classes that have a docstring.
    split: "train" or "heldout" (same held-out files as the raw text)."""
    rng = random.Random(seed)
    out = []
    for rel, held in corpus_files():
        if held != (split == "heldout"):
            continue
        src = read_source(rel)
        try:
            tree = ast.parse(src)
        except SyntaxError:
            continue
        lines = src.splitlines(keepends=True)
        mod = _module_name(rel)

        def segment(node):
            # decorators included; dedent methods so the answer starts at column 0
            start = min([d.lineno for d in node.decorator_list] + [node.lineno]) - 1
            return textwrap.dedent("".join(lines[start:node.end_lineno])).rstrip() + "\n"

        def add(node, templates, **kw):
            doc = _first_doc_line(node)
            if doc is None:
                return
            ans = segment(node)
            if len(ans) > MAX_ANSWER_CHARS:
                return
            t = rng.choice(templates)
            out.append((t.format(name=node.name, mod=mod, doc=doc, **kw), ans))

        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                add(node, PROMPTS_FUNC)
            elif isinstance(node, ast.ClassDef):
                add(node, PROMPTS_CLASS)
                for sub in node.body:
                    if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        add(sub, PROMPTS_METHOD, cls=node.name)
    return out


def render_chat(prompt, answer=None):
    """Exactly what the Qwen3 chat template renders for [user, assistant] (the assistant turn
    is the last one, so it gets an empty think block). answer=None -> the generation prompt
    with enable_thinking=False."""
    s = "<|im_start|>user\n" + prompt + "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
    if answer is None:
        return s
    return s + answer + "<|im_end|>\n"


# ---------------------------------------------------------------------------------------
def token_streams(tok_dir, rebuild=False):
    """Tokenized corpus, cached as out/demo/streams-<hash of tokenizer.json>.npz.
    Returns {"train", "heldout"}: raw source files, each followed by <|endoftext|>;
    {"chat_train", "chat_heldout"}: rendered conversations concatenated, with
    {"chat_train_starts", "chat_heldout_starts"}: each conversation's start offset."""
    import numpy as np
    tj_path = os.path.join(tok_dir, "tokenizer.json")
    with open(tj_path, "rb") as f:
        h = hashlib.sha1(f.read()).hexdigest()[:12]
    cache = os.path.join(CACHE_DIR, f"streams-{h}.npz")
    if os.path.exists(cache) and not rebuild:
        z = np.load(cache)
        return {k: z[k] for k in z.files}
    tok = Tokenizer(tj_path)
    eot = tok.added["<|endoftext|>"]
    res = {}
    raw = {"train": [], "heldout": []}
    for rel, held in corpus_files():
        raw["heldout" if held else "train"].extend(tok.encode(read_source(rel)) + [eot])
    for split in ("train", "heldout"):
        res[split] = np.array(raw[split], dtype=np.int32)
        ids, starts = [], []
        for p, a in chat_samples(split):
            starts.append(len(ids))
            ids.extend(tok.encode(render_chat(p, a)))
        res["chat_" + split] = np.array(ids, dtype=np.int32)
        res[f"chat_{split}_starts"] = np.array(starts, dtype=np.int64)
    os.makedirs(CACHE_DIR, exist_ok=True)
    np.savez(cache, **res)
    return res


if __name__ == "__main__":
    files = corpus_files()
    held = [r for r, h in files if h]
    nbytes = lambda fs: sum(os.path.getsize(os.path.join(STDLIB, r)) for r in fs)
    print(f"{len(files)} files, {nbytes([r for r, _ in files])} bytes; held out {len(held)} "
          f"files, {nbytes(held)} bytes")
    for split in ("train", "heldout"):
        cs = chat_samples(split)
        print(split, "chat samples:", len(cs), "chars:", sum(len(render_chat(*c)) for c in cs))
    print(render_chat(*chat_samples("train")[0])[:600])
