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
