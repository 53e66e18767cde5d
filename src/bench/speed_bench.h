#pragma once
// dflash bench without --draft, --cache-type or --vs-llamacpp: the speed of random-weight model
// shapes (or of one model) per weight format, against the measured bandwidth and int8 roofs.
#include <string>
#include <vector>

namespace dflash::bench {

struct SpeedBenchOptions {
  std::vector<std::string> shapes{"qwen2.5-0.5b", "qwen3-1.7b"};  // shape_config names
  std::vector<std::string> weights{"bf16", "q8", "q4"};
  std::string model;  // a model folder or GGUF file: benchmark it instead of the shapes
  int threads = 0, prompt_tokens = 512, gen_tokens = 64;
  bool json = false;
};

// Prints the table (or with o.json the JSON rows) on stdout, the measured rates on stderr.
void run_speed_bench(const SpeedBenchOptions& o);

}  // namespace dflash::bench
