#!/usr/bin/python3
"""Check that corpus.render_chat is byte-identical to the Qwen3 chat template (in our
tokenizer_config.json) rendered the way Hugging Face renders it (jinja2 sandbox,
trim_blocks, lstrip_blocks, loopcontrols).
  /usr/bin/python3 tools/demo/check_chat.py"""
import json, os, sys
import jinja2, jinja2.ext, jinja2.sandbox
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import corpus  # noqa: E402

with open(os.path.join(corpus.REPO, "models/demo/target/tokenizer_config.json")) as f:
    tmpl_src = json.load(f)["chat_template"]
env = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                                   extensions=[jinja2.ext.loopcontrols])
env.filters["tojson"] = lambda x, **k: json.dumps(x, ensure_ascii=False)
tmpl = env.from_string(tmpl_src)
bad = 0
samples = corpus.chat_samples("heldout")
for p, a in samples:
    full = tmpl.render(messages=[{"role": "user", "content": p},
                                 {"role": "assistant", "content": a}])
    gen = tmpl.render(messages=[{"role": "user", "content": p}], add_generation_prompt=True,
                      enable_thinking=False)
    bad += full != corpus.render_chat(p, a)
    bad += gen != corpus.render_chat(p)
print(f"{len(samples)} conversations, {bad} mismatches")
sys.exit(1 if bad else 0)
