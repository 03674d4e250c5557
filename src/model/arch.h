// The model architectures Tessera knows, described as data: naming, rope style and optional parts.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tessera {

enum class Arch { Llama, Qwen2, Qwen3, Qwen3Moe, Gemma3, Gemma4 };

// How RoPE pairs dimensions: NORM rotates (x[2i], x[2i+1]); NEOX rotates (x[i], x[i + n_rot/2]).
enum class RopeStyle { Norm, Neox };

// The FFN's gated activation: SwiGLU (silu(gate) * up) or GeGLU with the tanh GELU (gelu(gate) * up).
enum class FfnActivation { Silu, Gelu };

struct ArchInfo {
  Arch arch;
  std::string_view name;  // general.architecture value and metadata key prefix
  RopeStyle rope;
  bool attn_bias;  // q/k/v biases (qwen2)
  bool qk_norm;    // per-head RMS norm of q and k before RoPE (qwen3, gemma)
  bool moe_only;   // every layer is a mixture of experts (qwen3moe); llama is MoE when it has experts (mixtral)
  // Gemma: the embedding scaled by sqrt(n_embd) on input, RMS norms after attention and FFN before each residual
  // add, GeGLU, sliding-window layers.
  bool gemma;
  FfnActivation ffn_act;
};

const ArchInfo& arch_info(Arch arch);
std::optional<Arch> arch_from_name(std::string_view name);
// "llama, qwen2, qwen3, qwen3moe, gemma3, gemma4" for error messages.
std::string supported_arch_names();

}  // namespace tessera
