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
  auto* sub = app.add_subcommand("graft", "Grow a trained small dense Qwen3 pair into a real shape computing the same function");
  sub->add_option("--model", o->model, "Small target folder (Qwen3ForCausalLM); default: the shipped models/demo/target");
  sub->add_option("--draft", o->draft, "Its DFlash or DFlash2 draft folder; default: the shipped models/demo/draft2");
  sub->add_option("--shape", o->shape, "qwen3-1.7b | qwen3-8b | qwen3-graft-test[-untied]")->required();
  sub->add_option("--out", o->out, "Writes OUT/target, OUT/draft and OUT/graft.json")->required();
  sub->add_option("--dtype", o->dtype, "Matrices as bf16 or f32 (norm weights are always f32)")
      ->check(CLI::IsMember({"bf16", "f32"}))
      ->capture_default_str();
  sub->add_option("--seed", o->seed, "Seed of the dead weights' random values")->capture_default_str();
  sub->callback([o] {
    const ModelConfig c = bench::shape_config(o->shape);
    if (!c.arch || c.architecture != "Qwen3ForCausalLM")
      throw Error("graft grows dense Qwen3 shapes only (qwen3-1.7b, qwen3-8b, qwen3-graft-test), not '" + o->shape + "'");
    GraftOptions g;
    // The shipped dense demo pair (not resolve_model_dir's default, the Qwen3.5 hybrid one).
    g.model = o->model.empty() ? shipped_path("models/demo/target") : o->model;
    g.draft = o->draft.empty() ? shipped_path("models/demo/draft2") : o->draft;
    g.out = o->out;
    g.dtype = o->dtype == "f32" ? DType::F32 : DType::BF16;
    g.seed = o->seed;
    g.shape = GraftShape{o->shape, c.hidden, c.n_layers, c.n_heads, c.n_kv_heads, c.head_dim, c.ffn, c.vocab,
                         c.tie_embeddings, 5};
    graft_pair(g);
    std::printf("%s\n", nlohmann::json{{"out", o->out}, {"shape", o->shape}, {"dtype", o->dtype}}.dump().c_str());
  });
}

}  // namespace dflash::cli
