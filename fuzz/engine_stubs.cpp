// openai_protocol.cpp's template_context() asks the loaded Engine for its bos/eos text; the
// harnesses never call it and do not link the engine (models, kernels, decoding). These stand-ins
// only satisfy the linker, and abort if something reaches them after all.
#include <cstdlib>

#include "server/engine.h"

namespace dflash::server {

std::optional<std::string> Engine::bos_text() const { std::abort(); }
std::optional<std::string> Engine::eos_text() const { std::abort(); }

}  // namespace dflash::server
