#pragma once
// A target architecture is data: the switches that tell the shared decoder forward what this
// family has, and the tensor names of its checkpoints.
#include <string>
#include <vector>

namespace dflash {

struct ArchSpec {
  std::string hf_name;       // config.json "architectures" entry
  std::string model_type;    // config.json "model_type"
  bool qk_norm = false;      // RMSNorm over each q/k head before RoPE (Qwen3)
  bool qkv_bias = false;     // biases on q/k/v projections (Qwen2)
};

const ArchSpec* find_arch_by_hf_name(const std::string& name);
const ArchSpec* find_arch_by_model_type(const std::string& type);
std::string supported_arch_names();

}  // namespace dflash
