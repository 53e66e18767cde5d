#!/usr/bin/python3
"""dflash graft on the Qwen3.5 hybrid: the shipped hybrid demo pair (models/demo35: 3 Gated
DeltaNet layers and a gated full-attention layer, its DFlash2 draft) grown into
qwen3.5-graft-test (hidden 512, 8 layers in the 3:1 pattern, 8/2 attention heads of 128 with
32 rotated dims, linear layers of 4 key / 8 value heads of 64, vocab 4096) at f32 computes the
small pair's function:

- greedy ids equal, logits within 1e-5 relative at every position, padding never wins and sits
  >= 1000 below, the grown draft proposes the small draft's blocks, speculative runs accept the
  same (graft_common.check_grown_pair);
- the dead weights of a linear layer are random, extra layers (linear and full attention) read
  nothing from the live channels, dead value heads read nothing;
- a Qwen3.5 shape refuses a dense target and a dense shape a hybrid one, before writing anything.
"""
import json
import os
import tempfile

from graft_common import check_grown_pair, f32_tensor, run, run_fails  # noqa: E402
from harness import SRC, check, finish  # noqa: E402

DEMO = os.path.join(SRC, "models", "demo35")
SMALL_T, SMALL_D = os.path.join(DEMO, "target"), os.path.join(DEMO, "draft2")
LIVE_V, HS = 4032, 256

with tempfile.TemporaryDirectory() as tmp:
    grown = os.path.join(tmp, "grown")
    run("graft", "--shape", "qwen3.5-graft-test", "--out", grown, "--dtype", "f32", "--seed", "7")
    big_t, big_d = os.path.join(grown, "target"), os.path.join(grown, "draft")
    meta = json.load(open(os.path.join(grown, "graft.json")))
    check("graft.json names the hybrid demo pair (the default for a Qwen3.5 shape) and the shape",
          meta["shape"] == "qwen3.5-graft-test" and os.path.samefile(meta["source_target"], SMALL_T)
          and os.path.samefile(meta["source_draft"], SMALL_D), json.dumps(meta))
    root = json.load(open(os.path.join(big_t, "config.json")))
    tcfg, dcfg = root["text_config"], json.load(open(os.path.join(big_d, "config.json")))
    kinds = ["full_attention" if (l + 1) % 4 == 0 else "linear_attention" for l in range(8)]
    check("grown target config has the shape (3:1 layer pattern, linear heads, multimodal outer form kept)",
          root["architectures"] == ["Qwen3_5ForConditionalGeneration"] and tcfg["hidden_size"] == 512
          and tcfg["num_hidden_layers"] == 8 and tcfg["layer_types"] == kinds and tcfg["head_dim"] == 128
          and tcfg["linear_num_key_heads"] == 4 and tcfg["linear_num_value_heads"] == 8
          and tcfg["linear_key_head_dim"] == 64 and tcfg["linear_value_head_dim"] == 64 and tcfg["vocab_size"] == 4096
          and root["vision_config"]["out_hidden_size"] == 512, json.dumps(tcfg))
    check("grown draft: 5 layers, its own attention sizes (8/4 heads of 128), the same taps",
          dcfg["num_hidden_layers"] == 5 and dcfg["hidden_size"] == 512 and dcfg["num_attention_heads"] == 8
          and dcfg["num_key_value_heads"] == 4 and dcfg["head_dim"] == 128
          and dcfg["dflash_config"]["target_layer_ids"] == [0, 1, 2, 3], json.dumps(dcfg))

    st = os.path.join(big_t, "model.safetensors")
    p = "model.language_model.layers."
    (r0, c0), qkv0 = f32_tensor(st, p + "0.linear_attn.in_proj_qkv.weight")
    dead_cols = [qkv0[r * c0 + c] for r in range(0, r0, 5) for c in range(HS + 2, c0, 37)]
    # Value head 4 of the big layer (dead: the small layer has 4 value heads in 2 groups, big
    # groups of 2 carry them in key heads 0 and 1) reads nothing from the live channels.
    v4 = 2 * 4 * 64 + 4 * 64
    dead_head_live = [qkv0[r * c0 + c] for r in range(v4, v4 + 64) for c in range(HS)]
    check("a live linear layer: dead columns random, a dead value head's rows zero on live channels",
          sum(x != 0 for x in dead_cols) > 0.99 * len(dead_cols) and not any(dead_head_live))
    (r4, c4), qkv4 = f32_tensor(st, p + "4.linear_attn.in_proj_qkv.weight")
    (r7, c7), q7 = f32_tensor(st, p + "7.self_attn.q_proj.weight")
    check("extra layers (linear 4, full attention 7) read nothing from live channels, random elsewhere",
          not any(qkv4[r * c4 + c] for r in range(0, r4, 3) for c in range(HS + 2))
          and not any(q7[r * c7 + c] for r in range(0, r7, 3) for c in range(HS + 2))
          and sum(qkv4[r * c4 + c] != 0 for r in range(0, r4, 7) for c in range(HS + 2, c4, 41)) > 0)

    worst, gap = check_grown_pair(tmp, SMALL_T, SMALL_D, big_t, big_d, LIVE_V, tcfg["vocab_size"])
    print(f"worst relative logit difference {worst:.3g}, smallest live-max minus padding-max gap {gap:.3g}")

    # Families must match, and a refusal writes nothing.
    bad = os.path.join(tmp, "bad")
    rc, err = run_fails("graft", "--shape", "qwen3.5-graft-test", "--model", os.path.join(SRC, "models", "demo", "target"),
                        "--draft", os.path.join(SRC, "models", "demo", "draft2"), "--out", bad)
    check("a Qwen3.5 shape refuses a dense target, writing nothing",
          rc != 0 and "Qwen3.5" in err and not os.path.exists(bad), err)
    rc, err = run_fails("graft", "--shape", "qwen3-graft-test", "--model", SMALL_T, "--draft", SMALL_D, "--out", bad)
    check("a dense shape refuses a hybrid target, writing nothing",
          rc != 0 and "Qwen3ForCausalLM" in err and not os.path.exists(bad), err)

finish()
