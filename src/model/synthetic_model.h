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

// "tiny", "1b" or "moe-small" dimensions for an architecture ("llama", "qwen2", "qwen3", "qwen3moe", "mixtral").
// Throws Error listing the valid names.
ModelConfig preset_config(std::string_view preset, std::string_view arch);
std::string preset_names();
std::string synthetic_arch_names();

// Writes the model; returns the number of bytes written. Progress lines go to standard error.
uint64_t write_synthetic_model(const SyntheticSpec& spec, const std::filesystem::path& out);

}  // namespace tessera
