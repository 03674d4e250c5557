// The tensors an architecture expects (GGUF names and shapes), used to generate and to validate model files.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/model_config.h"

namespace tessera {

enum class TensorRole {
  TokenEmbd,
  OutputNorm,
  Output,
  RopeFreqs,
  AttnNorm,
  AttnQ,
  AttnK,
  AttnV,
  AttnOut,
  AttnQBias,
  AttnKBias,
  AttnVBias,
  AttnQNorm,
  AttnKNorm,
  FfnNorm,
  FfnGate,
  FfnUp,
  FfnDown,
  FfnGateInp,
  FfnGateExps,
  FfnUpExps,
  FfnDownExps,
  // Gemma.
  PostAttnNorm,     // post_attention_norm: RMS norm of the attention output before the residual add
  PostFfnNorm,      // post_ffw_norm
  PerLayerTokEmbd,  // gemma4 per-layer inputs: per_layer_token_embd, per_layer_model_proj, per_layer_proj_norm
  PerLayerProj,
  PerLayerProjNorm,
  PleGate,  // blk.N.inp_gate, proj, post_norm: the layer's per-layer input added to the stream
  PleProj,
  PleNorm,
  LayerOutScale,    // layer_output_scale
  FfnGateInpScale,  // gemma4 MoE: router input scale, expert down scales, fused gate/up experts, the extra norms
  FfnDownExpsScale,
  FfnGateUpExps,
  PostFfnNorm1,
  PreFfnNorm2,
  PostFfnNorm2,
};

struct TensorSpec {
  std::string name;
  TensorRole role;
  int64_t layer;            // -1 for tensors outside the blocks
  std::vector<int64_t> ne;  // GGUF order
  bool is_vector;           // norms and biases: kept in f32, never quantized
  bool optional;            // the file may omit it (tied output, rope factors)
};

std::vector<TensorSpec> expected_tensors(const ModelConfig& config);

// Name of the layer's tensor with the given GGUF suffix, e.g. layer_tensor_name(3, "attn_q.weight").
std::string layer_tensor_name(int64_t layer, const std::string& suffix);

// Layer index of a "blk.N." tensor name, or -1.
int64_t layer_of_tensor(const std::string& name);

}  // namespace tessera
