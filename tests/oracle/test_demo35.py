"""The shipped Qwen3.5-architecture demo pair (models/demo35) and the training-side forward:
  - tools/demo/qwen35_fast.py (batched, chunked Gated DeltaNet, used to train the target and
    to feed the draft's training) equals tools/reference/qwen35.py (sequential) on a random
    hybrid of the demo's shape: logits, taps, carried state, left-padded batched greedy;
  - models/demo35/target has the promised shape and form (multimodal, tied, A_log F32, the
    rest BF16), loads in the reference and continues a Python prompt greedily;
  - models/demo35/draft2 loads in tools/reference/dflash2_draft.py against that target."""
import json
import os
import sys

import torch

src = os.environ.get("DFLASH_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(src, "tools"))
sys.path.insert(0, os.path.join(src, "tools", "demo"))
import qwen35_fast  # noqa: E402
from reference.qwen35 import Qwen35Config, Qwen35Model, load_hf_folder  # noqa: E402
from reference.dflash2_draft import load_draft2  # noqa: E402
from reference.safetensors_io import read_header  # noqa: E402

torch.set_num_threads(1)
fails = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        fails.append(what)


# 1. fast forward == reference on a random model of the demo's shape
target_dir = os.path.join(src, "models", "demo35", "target")
with open(os.path.join(target_dir, "config.json")) as f:
    cfg_json = json.load(f)
torch.manual_seed(0)
m = Qwen35Model(Qwen35Config.from_hf(cfg_json))
with torch.no_grad():
    for n, p in m.named_parameters():
        if p.dim() == 2:
            p.normal_(0, 0.05)
        elif n.endswith("A_log"):
            p.copy_(torch.log(torch.rand(p.shape) * 8 + 0.5))
        elif n.endswith("dt_bias"):
            p.normal_(-2, 1)
        elif "norm" in n:
            p.add_(0.1 * torch.randn(p.shape))
ids = torch.randint(0, 4000, (2, 150))   # 150 rows: 3 chunks of 64, the last one partial
lf, hf = qwen35_fast.forward(m, ids, return_hidden=True)
for r in range(2):
    lr, hr = m(ids[r], return_hidden=True)
    d = max(float((lf[r] - lr).abs().max()), max(float((hf[i][r] - hr[i]).abs().max())
                                                   for i in range(len(hr))))
    check(d < 1e-3, f"fast forward vs reference, row {r}: max |diff| {d:.2e}")
st = qwen35_fast.new_state(m, 1)
l1 = qwen35_fast.forward(m, ids[:1, :100], st)
l2 = qwen35_fast.forward(m, ids[:1, 100:], st)
d = float((torch.cat([l1, l2], 1)[0] - lf[0]).abs().max())
check(d < 1e-3, f"fast forward continued from its state: max |diff| {d:.2e}")
prompts = [ids[0, :37].tolist(), ids[1, :50].tolist()]
got = qwen35_fast.greedy(m, prompts, 12)
check(all(g == m.greedy(p, 12) for g, p in zip(got, prompts)),
      "left-padded batched greedy == reference greedy")

# 2. the shipped target
t = cfg_json["text_config"]
check(cfg_json["architectures"] == ["Qwen3_5ForConditionalGeneration"]
      and cfg_json["model_type"] == "qwen3_5" and "vision_config" in cfg_json, "multimodal form")
want = dict(hidden_size=256, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
            head_dim=64, linear_num_key_heads=2, linear_num_value_heads=4,
            linear_key_head_dim=32, linear_value_head_dim=32, linear_conv_kernel_dim=4,
            intermediate_size=768, vocab_size=4032, tie_word_embeddings=True)
check(all(t[k] == v for k, v in want.items()) and t["layer_types"] ==
      ["linear_attention"] * 3 + ["full_attention"] and t["rope_parameters"]["rope_theta"] == 1e6
      and t["partial_rotary_factor"] == 0.25, "text_config shape")
hdr, _ = read_header(os.path.join(target_dir, "model.safetensors"))
dts = {k: v["dtype"] for k, v in hdr.items() if k != "__metadata__"}
check(all(k.startswith("model.language_model.") for k in dts), "tensors under model.language_model.")
check(all((v == "F32") == k.endswith("A_log") for k, v in dts.items()), "BF16 except A_log F32")
cfg, model = load_hf_folder(target_dir)
sys.path.insert(0, os.path.join(src, "tools", "demo"))
import corpus  # noqa: E402
tok = corpus.Tokenizer(os.path.join(target_dir, "tokenizer.json"))
out = tok.decode(model.greedy(tok.encode("import os\n\n\ndef "), 24))
print(repr(out))
check(out.isascii() and ("(" in out or ":" in out), "greedy continuation looks like Python")

# 3. the shipped draft
dcfg, draft = load_draft2(os.path.join(src, "models", "demo35", "draft2"), cfg.num_hidden_layers)
check(dcfg.hidden_size == cfg.hidden_size and dcfg.mask_token_id == 4005
      and list(dcfg.target_layer_ids) == [0, 1, 2, 3] and dcfg.block_size == 8,
      "draft2 config (hidden 256, mask 4005, taps 0..3, block 8)")
with torch.no_grad():
    p = tok.encode("def f(x):\n    return")
    _, hid = model(torch.tensor(p), return_hidden=True)
    feats = torch.cat([hid[i] for i in dcfg.target_layer_ids], -1)
    block = draft.propose_tokens(feats[:-1], p[-1], model.embed_tokens.weight,
                                 model.output_weight(), 8)
check(len(block) == 7 and all(0 <= b < 4032 for b in block), f"draft proposes a block {block}")

if fails:
    sys.exit(f"test_demo35: {len(fails)} failed")
print("test_demo35: passed")
