// dflash convert: a Hugging Face folder (qwen3, qwen2, llama, or a Qwen3.5 hybrid) -> one GGUF
// file that llama.cpp loads (the family's writer does the conversion: dense_gguf_write.h,
// qwen35_gguf_write.h; this is the command's options and the choice between them).
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "kernels/weight_matrix.h"
#include "formats/json_file.h"
#include "models/dense/dense_gguf_write.h"
#include "models/qwen35/qwen35_config.h"
#include "models/qwen35/qwen35_gguf_write.h"
#include "util/mapped_file.h"

namespace dflash::cli {

void add_convert_command(CLI::App& app) {
  struct Opts {
    std::string model, out, type = "bf16";
  };
  auto o = std::make_shared<Opts>();
  auto* sub = app.add_subcommand("convert", "Convert a Hugging Face model folder to a GGUF file llama.cpp loads");
  sub->add_option("--model", o->model, "Hugging Face folder (qwen3, qwen2, llama, qwen3_5, dense qwen3_next)")->required();
  sub->add_option("--out", o->out, "Output .gguf file")->required();
  sub->add_option("--type", o->type, "bf16 | q8_0 | q4_0 | f16 | f32")->check(CLI::IsMember({"bf16", "q8_0", "q4_0", "f32", "f16"}));
  sub->callback([o] {
    const std::string config = o->model + "/config.json";
    if (file_exists(config) && is_qwen35_config(read_json_file(config)))
      convert_qwen35_to_gguf(o->model, o->out, parse_wtype(o->type));
    else
      convert_to_gguf(o->model, o->out, parse_wtype(o->type));
    std::printf("%s\n", nlohmann::json{{"out", o->out}, {"type", o->type}}.dump().c_str());
  });
}

}  // namespace dflash::cli
