// Table of supported architectures; adding one starts here.
#include "model/arch.h"

#include <array>

namespace tessera {
namespace {

constexpr std::array kArchs = {
    ArchInfo{Arch::Llama, "llama", RopeStyle::Norm, false, false, false, false, FfnActivation::Silu},
    ArchInfo{Arch::Qwen2, "qwen2", RopeStyle::Neox, true, false, false, false, FfnActivation::Silu},
    ArchInfo{Arch::Qwen3, "qwen3", RopeStyle::Neox, false, true, false, false, FfnActivation::Silu},
    ArchInfo{Arch::Qwen3Moe, "qwen3moe", RopeStyle::Neox, false, true, true, false, FfnActivation::Silu},
    ArchInfo{Arch::Gemma3, "gemma3", RopeStyle::Neox, false, true, false, true, FfnActivation::Gelu},
    ArchInfo{Arch::Gemma4, "gemma4", RopeStyle::Neox, false, true, false, true, FfnActivation::Gelu},
};

}  // namespace

const ArchInfo& arch_info(Arch arch) {
  for (const auto& a : kArchs) {
    if (a.arch == arch) return a;
  }
  return kArchs[0];
}

std::optional<Arch> arch_from_name(std::string_view name) {
  for (const auto& a : kArchs) {
    if (a.name == name) return a.arch;
  }
  return std::nullopt;
}

std::string supported_arch_names() {
  std::string out;
  for (const auto& a : kArchs) {
    if (!out.empty()) out += ", ";
    out += a.name;
  }
  return out;
}

}  // namespace tessera
