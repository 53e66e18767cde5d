#include "models/dense/arch_spec.h"

namespace dflash {
// Qwen3: per-head RMSNorm on q and k before RoPE, no projection biases.
extern const ArchSpec kQwen3Arch{"Qwen3ForCausalLM", "qwen3", /*qk_norm=*/true, /*qkv_bias=*/false};
}  // namespace dflash
