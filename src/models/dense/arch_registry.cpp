#include "models/dense/arch_spec.h"

namespace dflash {

extern const ArchSpec kQwen3Arch, kQwen2Arch, kLlamaArch;

static const ArchSpec* const kAll[] = {&kQwen3Arch, &kQwen2Arch, &kLlamaArch};

const ArchSpec* find_arch_by_hf_name(const std::string& name) {
  for (auto* a : kAll)
    if (a->hf_name == name) return a;
  return nullptr;
}

const ArchSpec* find_arch_by_model_type(const std::string& type) {
  for (auto* a : kAll)
    if (a->model_type == type) return a;
  return nullptr;
}

std::string supported_arch_names() {
  std::string s;
  for (auto* a : kAll) s += (s.empty() ? "" : ", ") + a->hf_name;
  return s;
}

}  // namespace dflash
