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
  uint64_t per_layer_embd_bytes = 0;    // per_layer_token_embd (Gemma 4): looked up by one row per token
  uint64_t expert_bytes_per_layer = 0;  // MoE: all experts of one layer (average)
  // Bytes a decode step reads: all weights but the embedding tables (one row each), MoE layers count k of n experts
  // (the dense MLP beside Gemma 4's experts is read by every token).
  uint64_t decode_bytes_per_token = 0;
  // Multiply-adds x2 per token through all layers, the per-layer input projection and the output head (attention
  // over the context excluded).
  uint64_t flops_per_token = 0;
};

ModelProfile profile_model(const gguf::TensorSource& file, const ModelConfig& config);

struct MemoryEstimate {
  uint64_t weights = 0;
  uint64_t kv_cache = 0;
  uint64_t compute = 0;
  uint64_t total() const { return weights + kv_cache + compute; }
};

// Bytes of K and V for one position over every layer with K/V of its own, with the cache stored as kv_type (F16 or
// F32). Times n_ctx this is the cache only where every layer keeps every position: a sliding-window layer keeps a
// bounded ring, so use kv_cache_bytes for the memory at a context.
uint64_t kv_bytes_per_token(const ModelConfig& config, GgmlType kv_type);

// The KV cache of n_slots sequences of n_ctx positions over the whole model: kv_cache_config(...).bytes(), the
// memory a single-node run allocates.
uint64_t kv_cache_bytes(const ModelConfig& config, int64_t n_ctx, GgmlType kv_type, int64_t n_slots = 1);

// The layers of one kind (sliding with one window, or global, with one K/V shape) and their cache at a context.
struct KvLayerType {
  int64_t window = 0;  // sliding window; 0: global
  int64_t n_head_kv = 0;
  int64_t head_dim_k = 0;
  int64_t head_dim_v = 0;
  int64_t n_layers = 0;   // layers of this kind with a cache of their own
  int64_t n_reusing = 0;  // layers of this kind that attend to an earlier layer's K/V and keep none
  int64_t n_cells = 0;    // positions each of those caches keeps per sequence at the context
  uint64_t bytes = 0;     // K and V of all n_layers caches, one sequence
};
// Global kinds first, in the order they first occur.
std::vector<KvLayerType> kv_layer_types(const ModelConfig& config, int64_t n_ctx, GgmlType kv_type);

// Memory to run with a context of n_ctx tokens and prompt batches of n_batch tokens.
MemoryEstimate estimate_memory(const ModelProfile& profile, const ModelConfig& config, int64_t n_ctx,
                               GgmlType kv_type = GgmlType::F16, int64_t n_batch = 512);

}  // namespace tessera
