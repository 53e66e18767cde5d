#include "models/dense/arch_spec.h"

namespace dflash {
// Llama 2/3: the plain pre-norm decoder; biases only when config.qkv_bias says so.
extern const ArchSpec kLlamaArch{"LlamaForCausalLM", "llama", /*qk_norm=*/false, /*qkv_bias=*/false};
}  // namespace dflash
