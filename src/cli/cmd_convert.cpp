// dflash convert: a Hugging Face folder (qwen3, qwen2, llama) -> one GGUF file that llama.cpp
// loads (models/gguf_write.h does the conversion; this is the command's options).
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "kernels/weight_matrix.h"
#include "models/dense/dense_gguf_write.h"

namespace dflash::cli {

void add_convert_command(CLI::App& app) {
  struct Opts {
    std::string model, out, type = "bf16";
  };
  auto o = std::make_shared<Opts>();
  auto* sub = app.add_subcommand("convert", "Convert a Hugging Face model folder to a GGUF file llama.cpp loads");
  sub->add_option("--model", o->model, "Hugging Face folder (qwen3, qwen2, llama)")->required();
  sub->add_option("--out", o->out, "Output .gguf file")->required();
  sub->add_option("--type", o->type, "bf16 | q8_0 | q4_0")->check(CLI::IsMember({"bf16", "q8_0", "q4_0", "f32", "f16"}));
  sub->callback([o] {
    convert_to_gguf(o->model, o->out, parse_wtype(o->type));
    std::printf("%s\n", nlohmann::json{{"out", o->out}, {"type", o->type}}.dump().c_str());
  });
}

}  // namespace dflash::cli
