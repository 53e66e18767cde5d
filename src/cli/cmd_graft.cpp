// dflash graft: the options of growing a small trained pair into a real shape; the
// transformation is models/graft/ (docs/graft.md).
#include <cstdio>
#include <nlohmann/json.hpp>

#include "bench/model_speed.h"
#include "cli/commands.h"
#include "models/graft/graft.h"
#include "models/model_files.h"
#include "util/error.h"

namespace dflash::cli {

void add_graft_command(CLI::App& app) {
  struct Opts {
    std::string model, draft, shape, out, dtype = "bf16";
    uint64_t seed = 1;
  };
  auto o = std::make_shared<Opts>();
  auto* sub = app.add_subcommand("graft", "Grow a trained small pair (dense Qwen3 or Qwen3.5 hybrid) into a real shape computing the same function");
  sub->add_option("--model", o->model,
                  "Small target folder (Qwen3ForCausalLM, or Qwen3.5 for the qwen3.5-* shapes); default: the shipped "
                  "models/demo/target (models/demo35/target for qwen3.5-*)");
  sub->add_option("--draft", o->draft, "Its DFlash or DFlash2 draft folder; default: the shipped demo's draft2");
  sub->add_option("--shape", o->shape,
                  "qwen3-1.7b | qwen3-8b | qwen3.5-0.8b | qwen3.5-2b | qwen3.5-4b | qwen3-graft-test[-untied] | "
                  "qwen3.5-graft-test")
      ->required();
  sub->add_option("--out", o->out, "Writes OUT/target, OUT/draft and OUT/graft.json")->required();
  sub->add_option("--dtype", o->dtype, "Matrices as bf16 or f32 (norm weights are always f32)")
      ->check(CLI::IsMember({"bf16", "f32"}))
      ->capture_default_str();
  sub->add_option("--seed", o->seed, "Seed of the dead weights' random values")->capture_default_str();
  sub->callback([o] {
    const ModelConfig c = bench::shape_config(o->shape);
    const bool hybrid = c.linear.key_heads > 0;
    if (!hybrid && (!c.arch || c.architecture != "Qwen3ForCausalLM"))
      throw Error("graft grows dense Qwen3 and Qwen3.5 shapes (qwen3-1.7b, qwen3-8b, qwen3.5-0.8b, qwen3.5-2b, "
                  "qwen3.5-4b), not '" + o->shape + "'");
    GraftOptions g;
    // The shipped demo pair of the shape's family (a dense shape: not resolve_model_dir's
    // default, the Qwen3.5 hybrid one).
    const std::string demo = hybrid ? "models/demo35/" : "models/demo/";
    g.model = o->model.empty() ? shipped_path(demo + "target") : o->model;
    g.draft = o->draft.empty() ? shipped_path(demo + "draft2") : o->draft;
    g.out = o->out;
    g.dtype = o->dtype == "f32" ? DType::F32 : DType::BF16;
    g.seed = o->seed;
    g.shape = GraftShape{o->shape, c.hidden, c.n_layers, c.n_heads, c.n_kv_heads, c.head_dim, c.ffn, c.vocab,
                         c.tie_embeddings, 5};
    if (hybrid) {
      g.shape.rope_dims = c.rope_dims;
      g.shape.linear_key_heads = c.linear.key_heads, g.shape.linear_value_heads = c.linear.value_heads;
      g.shape.linear_key_dim = c.linear.key_dim, g.shape.linear_value_dim = c.linear.value_dim;
      g.shape.linear_conv = c.linear.conv_kernel;
      // The draft's attention: the published Qwen3.5-27B draft has 32/8 heads of 128 and the
      // target's FFN, the layers of a dense Qwen3 of that width; the smaller targets' drafts
      // are taken to follow the dense Qwen3 of their width likewise (0.6B/1.7B: 16/8, 4B: 32/8).
      g.shape.draft_heads = c.hidden >= 2560 ? 32 : c.hidden >= 1024 ? 16 : 8;
      g.shape.draft_kv_heads = c.hidden >= 1024 ? 8 : 4;
      g.shape.draft_head_dim = 128;
      g.shape.draft_ffn = c.ffn;
    }
    graft_pair(g);
    std::printf("%s\n", nlohmann::json{{"out", o->out}, {"shape", o->shape}, {"dtype", o->dtype}}.dump().c_str());
  });
}

}  // namespace dflash::cli
