"""A small but real byte-level BPE tokenizer (HF tokenizer.json layout, Qwen2-style) for test
models of any vocab size V: 256 byte symbols, learned merges, then 3 special tokens on top."""
import functools
import json
import os
import re
from collections import Counter

# The Qwen2 pre-tokenizer regex (written into tokenizer.json as-is).
QWEN2_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
               r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
# Python's re has no \p{..}: letters ~ [^\W\d_], digits ~ \d. Only used to learn merges.
_TRAIN_SPLIT = re.compile(r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|(?:[^\r\n\w]|_)?[^\W\d_]+|\d|"
                          r" ?(?:[^\s\w]|_)+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CHAT_TEMPLATE = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + "
    "message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")

# Fixed training text, so the same V always gives the same tokenizer.
SNIPPET = '''The quick brown fox jumps over the lazy dog. A language model reads a prompt, turns it
into tokens, and predicts the next token again and again until it reaches the end of the text.
Speculative decoding lets a small draft model propose several tokens that the large target
model then verifies in one pass; accepted tokens are kept and the first rejected one is replaced.
When the weights are stored in bfloat16 the engine converts them to float32 before it multiplies.
Attention compares every query with the keys of the previous positions and mixes their values.
There are many ways to write a good test: check the shapes, check the values, and check errors.
"Hello, world!" said the program. It's 2024 and we're testing 123 numbers, 4.5 floats & more.

def rms_norm(x, weight, eps=1e-6):
    """Normalize the last dimension and scale it."""
    variance = (x * x).mean(-1, keepdim=True)
    return x * torch.rsqrt(variance + eps) * weight


class Tokenizer:
    def __init__(self, vocab, merges):
        self.vocab = dict(vocab)
        self.ranks = {pair: i for i, pair in enumerate(merges)}

    def encode(self, text):
        ids = []
        for word in self.split(text):
            ids.extend(self.bpe(word))
        return ids

for i in range(10):
    if i % 2 == 0:
        print(f"even {i}")
    else:
        print("odd", i)
result = [x ** 2 for x in values if x is not None]
with open("config.json") as f:
    config = json.load(f)
'''


def bytes_to_unicode():
    """GPT-2's reversible byte -> printable character map, in its usual order (printable
    Latin-1 bytes keep their own code point, the rest are mapped to 256+n)."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    order, chars, n = keep[:], [chr(b) for b in keep], 0
    for b in range(256):
        if b not in keep:
            order.append(b)
            chars.append(chr(256 + n))
            n += 1
    return dict(zip(order, chars))


BYTE_CHARS = bytes_to_unicode()


def _learn_merges(n_tokens):
    """Greedy BPE on SNIPPET until the base+merged vocabulary has n_tokens entries; falls back
    to synthetic concatenations if the snippet runs out of pairs (large V)."""
    vocab = list(BYTE_CHARS.values())  # ids 0..255
    known = set(vocab)
    merges = []
    words = Counter(tuple(BYTE_CHARS[b] for b in w.encode("utf-8"))
                    for w in _TRAIN_SPLIT.findall(SNIPPET))
    while len(vocab) < n_tokens:
        pairs = Counter()
        for w, c in words.items():
            for a, b in zip(w, w[1:]):
                pairs[(a, b)] += c
        if not pairs:
            break
        # Most frequent pair; ties broken by the pair itself so the result is deterministic.
        (a, b), _ = min(pairs.items(), key=lambda kv: (-kv[1], kv[0]))
        merges.append((a, b))
        if a + b not in known:
            known.add(a + b)
            vocab.append(a + b)
        new_words = Counter()
        for w, c in words.items():
            out, i = [], 0
            while i < len(w):
                if i + 1 < len(w) and w[i] == a and w[i + 1] == b:
                    out.append(a + b)
                    i += 2
                else:
                    out.append(w[i])
                    i += 1
            new_words[tuple(out)] += c
        words = new_words
    # Fallback: pairs of existing tokens (printable ones first), each a valid merge.
    base = vocab[:]
    for a in base:
        for b in base:
            if len(vocab) >= n_tokens:
                return vocab, merges
            if a + b not in known:
                known.add(a + b)
                vocab.append(a + b)
                merges.append((a, b))
    return vocab, merges


@functools.lru_cache(maxsize=None)
def tokenizer_json(vocab_size):
    """tokenizer.json dict for a model whose embedding has vocab_size rows."""
    if vocab_size < 256 + len(SPECIALS):
        raise ValueError("vocab must hold the 256 byte symbols and 3 special tokens")
    n_regular = vocab_size - len(SPECIALS)
    vocab, merges = _learn_merges(n_regular)
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
                  "use_regex": False}
    return {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [
            {"id": n_regular + i, "content": s, "single_word": False, "lstrip": False,
             "rstrip": False, "normalized": False, "special": True}
            for i, s in enumerate(SPECIALS)],
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": QWEN2_REGEX}, "behavior": "Isolated",
             "invert": False},
            byte_level]},
        "post_processor": dict(byte_level),
        "decoder": dict(byte_level),
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": "", "end_of_word_suffix": "", "fuse_unk": False,
                  "byte_fallback": False, "ignore_merges": False,
                  "vocab": {t: i for i, t in enumerate(vocab)},
                  "merges": [list(m) for m in merges]},
    }


def special_ids(vocab_size):
    """{token: id} of the special tokens (they occupy the top ids)."""
    return {s: vocab_size - len(SPECIALS) + i for i, s in enumerate(SPECIALS)}


def tokenizer_config_json(vocab_size):
    ids = special_ids(vocab_size)
    return {
        "add_bos_token": False, "add_prefix_space": False,
        "added_tokens_decoder": {
            str(i): {"content": s, "lstrip": False, "normalized": False, "rstrip": False,
                     "single_word": False, "special": True} for s, i in ids.items()},
        "additional_special_tokens": ["<|im_start|>", "<|im_end|>"],
        "bos_token": None, "chat_template": CHAT_TEMPLATE, "clean_up_tokenization_spaces": False,
        "eos_token": "<|im_end|>", "errors": "replace", "model_max_length": 32768,
        "pad_token": "<|endoftext|>", "split_special_tokens": False,
        "tokenizer_class": "Qwen2Tokenizer", "unk_token": None,
    }


def write_tokenizer(out_dir, vocab_size):
    with open(os.path.join(out_dir, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tokenizer_json(vocab_size), f, ensure_ascii=False, indent=1)
    with open(os.path.join(out_dir, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(tokenizer_config_json(vocab_size), f, ensure_ascii=False, indent=2)
