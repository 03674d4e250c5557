// Synthetic GGUF models with seeded random weights (`tessera gen-model`), for tests and benchmarks.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "model/model_config.h"

namespace tessera {

struct SyntheticSpec {
  ModelConfig config;
  std::string type = "f32";  // a quant mix name (see quant_mix.h)
  uint64_t seed = 42;
  std::optional<std::filesystem::path> vocab_from;  // copy tokenizer.* keys from this GGUF
  int threads = 0;                                  // 0: all cores
};

// "tiny", "1b" or "moe-small" dimensions for an architecture ("llama", "qwen2", "qwen3", "qwen3moe", "mixtral",
// "gemma3", "gemma4"). `moe` asks for gemma4's MoE layout (qwen3moe and mixtral are always MoE, gemma4's moe-small
// is MoE by itself; other architectures have none). Throws Error listing the valid names, or saying why a preset
// does not exist for the architecture.
ModelConfig preset_config(std::string_view preset, std::string_view arch, bool moe = false);
std::string preset_names();
std::string synthetic_arch_names();

// Rebuilds gemma4's per-layer fields (sliding pattern, KV heads, FFN sizes, shared K/V layers) for c.n_layer layers
// in the layout of `like`, the preset c started from: its period of sliding layers ending in a global one, its
// sliding and global KV head counts (n_head_kv on every layer when given), its FFN size (n_ff when given) and about
// its share of KV-shared layers. gen-model calls it after explicit dimensions changed a preset.
void fit_gemma4_layers(ModelConfig& c, const ModelConfig& like, std::optional<int64_t> n_head_kv,
                       std::optional<int64_t> n_ff);

// Writes the model; returns the number of bytes written. Progress lines go to standard error.
uint64_t write_synthetic_model(const SyntheticSpec& spec, const std::filesystem::path& out);

}  // namespace tessera
