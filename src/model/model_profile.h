// What a model costs: weight bytes per layer, bytes read and FLOPs per decoded token, KV cache and memory needs.
// inspect shows it; the planner's cost model builds on it.
#pragma once

#include <cstdint>
#include <vector>

#include "gguf/gguf_file.h"
#include "model/model_config.h"
#include "tensor/ggml_type.h"

namespace tessera {

struct ModelProfile {
  uint64_t weight_bytes = 0;            // every tensor in the file
  uint64_t n_params = 0;                // every element of every tensor
  std::vector<uint64_t> layer_bytes;    // per block
  uint64_t embd_bytes = 0;              // token_embd
  uint64_t output_bytes = 0;            // output.weight (0 when tied) + output_norm
  uint64_t other_bytes = 0;             // anything outside blocks not counted above
  uint64_t expert_bytes_per_layer = 0;  // MoE: all experts of one layer (average)
  // Bytes a decode step reads: all weights but the embedding (one row), MoE layers count k of n experts.
  uint64_t decode_bytes_per_token = 0;
  // Multiply-adds x2 per token through all layers and the output head (attention over the context excluded).
  uint64_t flops_per_token = 0;
};

ModelProfile profile_model(const gguf::TensorSource& file, const ModelConfig& config);

struct MemoryEstimate {
  uint64_t weights = 0;
  uint64_t kv_cache = 0;
  uint64_t compute = 0;
  uint64_t total() const { return weights + kv_cache + compute; }
};

// Bytes of K and V for one token over all layers, with the cache stored as kv_type (F16 or F32).
uint64_t kv_bytes_per_token(const ModelConfig& config, GgmlType kv_type);

// Memory to run with a context of n_ctx tokens and prompt batches of n_batch tokens.
MemoryEstimate estimate_memory(const ModelProfile& profile, const ModelConfig& config, int64_t n_ctx,
                               GgmlType kv_type = GgmlType::F16, int64_t n_batch = 512);

}  // namespace tessera
