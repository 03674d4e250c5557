// Weight type mixes for writing models (`gen-model --type`): uniform types and llama.cpp-style K-quant mixes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "model/tensor_layout.h"
#include "tensor/ggml_type.h"

namespace tessera {

struct QuantMix {
  std::string_view name;  // "q4_k_m"
  GgmlType base;          // type of most matrices
  uint32_t file_type;     // general.file_type (llama_ftype numbering)
};

// Throws Error listing the valid names.
QuantMix quant_mix_from_name(std::string_view name);
std::string quant_mix_names();

// The type a tensor gets under a mix: vectors stay F32; the output head and, for *_M mixes, attn_v/ffn_down of
// some layers get more bits; a row length the type cannot block falls back to a compatible type. With a tied output
// head (no output.weight), token_embd is the head and gets its type, as llama-quantize does.
GgmlType tensor_type_for(const QuantMix& mix, const TensorSpec& spec, int64_t n_layer, bool tied_output = false);

}  // namespace tessera
