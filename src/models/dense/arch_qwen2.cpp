#include "models/dense/arch_spec.h"

namespace dflash {
// Qwen2 / Qwen2.5: biases on the q, k and v projections, no q/k norm.
extern const ArchSpec kQwen2Arch{"Qwen2ForCausalLM", "qwen2", /*qk_norm=*/false, /*qkv_bias=*/true};
}  // namespace dflash
