#!/usr/bin/python3
"""Differential test of `dflash template` against Python jinja2 configured like Hugging Face.

For each real chat template (Qwen3, Llama 3.1, Gemma 3, DeepSeek V3, gpt-oss, and a Qwen3.5-style
one written from the description of the real one) a deterministic corpus of conversations is
rendered by both; the outputs must be byte-identical, both must fail on the same conversations,
and raise_exception's message must reach dflash's error as is. Then a list of small snippets
(tests/oracle/chat_snippets.txt) checks language features the real templates do not reach.

Env: DFLASH_BIN (the dflash binary), DFLASH_SOURCE_DIR. Exits non-zero on any mismatch."""
import difflib
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import chat_corpus  # noqa: E402
import chat_oracle  # noqa: E402

BIN = os.environ.get("DFLASH_BIN") or os.path.join(chat_oracle.SOURCE_DIR, "build", "dflash")
CASES_PER_TEMPLATE = 80
MAX_DIFFS_SHOWN = 3


def run_cli(template_path, contexts):
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False, encoding="utf-8") as f:
        for ctx in contexts:
            f.write(json.dumps(ctx, ensure_ascii=False) + "\n")
        jsonl = f.name
    try:
        p = subprocess.run([BIN, "template", "--template", template_path, "--context-jsonl", jsonl,
                            "--now", chat_oracle.FIXED_NOW_ARG], capture_output=True)
    finally:
        os.unlink(jsonl)
    if p.returncode != 0:
        raise RuntimeError(f"dflash template failed ({p.returncode}): {p.stderr.decode(errors='replace')}")
    lines = p.stdout.decode("utf-8").splitlines()
    if len(lines) != len(contexts):
        raise RuntimeError(f"expected {len(contexts)} results, got {len(lines)}")
    out = []
    for line in lines:
        v = json.loads(line)
        out.append((None, v["error"]) if isinstance(v, dict) else (v, None))
    return out


def show_diff(label, want, got):
    print(f"--- mismatch: {label}")
    if want[0] is None or got[0] is None:
        print(f"    jinja2: {'error: ' + want[1] if want[0] is None else repr(want[0][:300])}")
        print(f"    dflash: {'error: ' + got[1] if got[0] is None else repr(got[0][:300])}")
        return
    diff = difflib.unified_diff(want[0].splitlines(True), got[0].splitlines(True), "jinja2", "dflash")
    sys.stdout.writelines(diff)
    print()


RAISED = "TemplateError: "  # how chat_oracle reports raise_exception(msg)


def compare(label, want, got, shown):
    same = (want[0] is None) == (got[0] is None) and want[0] == got[0]
    if same and want[0] is None and want[1].startswith(RAISED):
        same = got[1] == want[1][len(RAISED):]  # raise_exception's message must come through as is
    if not same and shown[0] < MAX_DIFFS_SHOWN:
        show_diff(label, want, got)
        shown[0] += 1
    return same


def check_templates(env):
    passed = failed = 0
    for seed, (name, path, source, tokens) in enumerate(chat_oracle.real_templates()):
        # Qwen3.5 gets its own cases too (list content, its raise_exception checks) and more random
        # ones: it is the template whose features (macros, loop.previtem/nextitem) the rest lack.
        extra = chat_corpus.qwen35_cases() if name == "qwen3.5" else ()
        count = 3 * CASES_PER_TEMPLATE if name == "qwen3.5" else CASES_PER_TEMPLATE
        contexts = chat_corpus.corpus(seed, count, tokens, extra)
        want = [chat_oracle.render(env, source, ctx) for ctx in contexts]
        got = run_cli(path, contexts)
        shown = [0]
        ok = sum(compare(f"{name} case {i}", w, g, shown) for i, (w, g) in enumerate(zip(want, got)))
        errors = sum(w[0] is None for w in want)
        print(f"{name}: {ok}/{len(contexts)} identical ({len(contexts) - errors} rendered, {errors} raised)")
        passed += ok
        failed += len(contexts) - ok
    return passed, failed


def check_snippets(env):
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "chat_snippets.txt")
    with open(path, encoding="utf-8") as f:
        snippets = [line.rstrip("\n").replace("⏎", "\n") for line in f
                    if line.strip() and not line.startswith("##")]
    context = {"d": {"a": 1, "items": 2, "b": [1, 2]}, "l": [3, 1, 2], "s": "héllo wörld", "n": None,
               "f": 1.5, "t": True, "msgs": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]}
    passed = failed = 0
    shown = [0]
    with tempfile.TemporaryDirectory() as tmp:
        ctx_path = os.path.join(tmp, "ctx.jsonl")
        with open(ctx_path, "w", encoding="utf-8") as f:
            f.write(json.dumps(context, ensure_ascii=False) + "\n")
        for i, src in enumerate(snippets):
            want = chat_oracle.render(env, src, json.loads(json.dumps(context)))
            tpl = os.path.join(tmp, f"s{i}.jinja")
            with open(tpl, "w", encoding="utf-8") as f:
                f.write(src)
            p = subprocess.run([BIN, "template", "--template", tpl, "--context-jsonl", ctx_path,
                                "--now", chat_oracle.FIXED_NOW_ARG], capture_output=True)
            if p.returncode != 0:  # a syntax error fails the whole command
                got = (None, p.stderr.decode(errors="replace").strip())
            else:
                v = json.loads(p.stdout.decode("utf-8"))
                got = (None, v["error"]) if isinstance(v, dict) else (v, None)
            if compare(f"snippet {src!r}", want, got, shown):
                passed += 1
            else:
                failed += 1
    print(f"snippets: {passed}/{len(snippets)} identical")
    return passed, failed


def main():
    if not os.path.exists(BIN):
        print(f"dflash binary not found at {BIN} (set DFLASH_BIN)")
        return 2
    env = chat_oracle.make_env()
    p1, f1 = check_templates(env)
    p2, f2 = check_snippets(env)
    passed, failed = p1 + p2, f1 + f2
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
