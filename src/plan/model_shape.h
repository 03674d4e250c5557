// A model as the cost model sees it (per-layer bytes, bytes read and FLOPs per token, KV bytes), from a GGUF file or
// without one from hyperparameters and a quant mix: presets of popular models for planning what you do not have yet.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/gguf_file.h"
#include "model/model_config.h"
#include "model/quant_mix.h"
#include "tensor/ggml_type.h"

namespace tessera::plan {

// Part of a layer that tensor parallelism splits one way (bytes, --repack's copy, FLOPs per token by kernel path).
struct PartCost {
  uint64_t bytes = 0;
  uint64_t packed = 0;
  double flops_q = 0;
  double flops_f = 0;
};

struct LayerCost {
  uint64_t weight_bytes = 0;  // every tensor of the block, all experts included
  uint64_t dense_bytes = 0;   // what every token reads: attention, norms, router, dense FFN
  uint64_t expert_bytes = 0;  // all experts of the layer (0 for dense layers)
  // FLOPs per token (2 per multiply-add) of the matrices every token uses, by the kernel path their weights take:
  // quantized weights go through int8 dot products, F32/F16/BF16 weights through f32 FMA.
  double dense_flops_q = 0;
  double dense_flops_f = 0;
  // The same for one expert; a token runs n_expert_used of them.
  double expert_flops_q = 0;
  double expert_flops_f = 0;
  uint64_t kv_bytes_per_token = 0;  // K and V of one position this layer attends to (its own or its source's)
  double attn_flops_per_pos = 0;    // QK and AV FLOPs per query token per attended position
  // Gemma: a sliding-window layer attends to the last `window` positions and its cache keeps a ring of kv_cells (the
  // window and room for one batch: kv_cache.h); a layer that reuses an earlier layer's K/V keeps none. 0: unbounded.
  int64_t window = 0;
  int64_t kv_cells = 0;
  bool kv_own = true;
  // Positions of one sequence at context ctx that the layer's cache keeps, and that one of its queries attends to.
  double kv_positions(double ctx) const {
    if (!kv_own) return 0;
    return kv_cells > 0 ? std::min(ctx, static_cast<double>(kv_cells)) : ctx;
  }
  double attended_positions(double ctx) const { return window > 0 ? std::min(ctx, static_cast<double>(window)) : ctx; }
  // The layer's KV cache for one sequence of n_ctx positions (what kv_cache_config allocates for it).
  uint64_t kv_cache_bytes(int64_t n_ctx) const {
    return static_cast<uint64_t>(kv_positions(static_cast<double>(n_ctx))) * kv_bytes_per_token;
  }
  // The copy --repack adds of the layer's matrices (Stage::packing_kernels(): 0 where this CPU packs nothing),
  // split as the bytes are: the dense part and all experts.
  uint64_t packed_dense_bytes = 0;
  uint64_t packed_expert_bytes = 0;
  // The dense part as tensor parallelism cuts it (src/model/model_shard.cpp): q and the attention output by query
  // heads, k and v by KV heads, the dense FFN by rows; the rest (norms, router, Gemma's extras) stays whole on
  // every rank. Each is included in dense_bytes / dense_flops_*.
  PartCost attn_q, attn_kv, ffn;
  // Quant block sizes of the matrices whose columns a rank's share is cut in (whole blocks): the attention output,
  // the dense FFN's down projection and the experts' (1 for float types).
  int64_t wo_block = 1, ffn_down_block = 1, exp_down_block = 1;
};

struct ModelCost {
  std::string label;        // "Qwen2.5-7B q4_k_m (estimated from its shape)" or the file name
  std::string type;         // weight type summary: the mix name, or the file's most common matrix type
  std::string matmul_type;  // ggml name of the most common matrix type ("q4_K"): the key of measured matmul rates
  bool from_file = false;
  ModelConfig config;
  GgmlType kv_type = GgmlType::F16;
  std::vector<LayerCost> layers;
  uint64_t embd_bytes = 0;      // token_embd, held by the first stage
  uint64_t embd_row_bytes = 0;  // what one token's lookup reads
  uint64_t output_bytes = 0;    // output.weight + output_norm, held by the last stage (tied: the norm only)
  double output_flops_q = 0;    // the head per token (a tied head reads token_embd)
  double output_flops_f = 0;
  uint64_t other_bytes = 0;  // tensors outside the blocks not counted above (rope factors), held by every stage
  // Gemma 4 per-layer inputs, held and computed by the first stage: per_layer_token_embd (looked up by one row per
  // token), per_layer_model_proj (multiplies every token) and its norm.
  uint64_t input_bytes = 0;
  uint64_t input_read_bytes = 0;  // what one token reads of them
  double input_flops_q = 0;
  double input_flops_f = 0;
  uint64_t input_packed_bytes = 0;   // --repack's copy of per_layer_model_proj
  uint64_t output_packed_bytes = 0;  // --repack's copy of the head's matrix (token_embd when tied), last stage
  uint64_t n_params = 0;

  int64_t n_layer() const { return static_cast<int64_t>(layers.size()); }
  uint64_t total_bytes() const;
  // Bytes the last stage's head reads per token: output.weight, or token_embd when tied.
  uint64_t head_read_bytes() const;
  // Bytes a single decoded token reads through every layer (k of n experts) plus the head.
  uint64_t decode_bytes_per_token() const;
  double flops_per_token() const;
  double bits_per_weight() const;
  std::vector<uint64_t> layer_weight_bytes() const;
  // Everything --repack adds for the whole model on one node.
  uint64_t total_packed_bytes() const;
  // The KV cache of one sequence of n_ctx positions over every layer (sliding layers bounded by their ring).
  uint64_t kv_cache_bytes(int64_t n_ctx) const;
  // The cache of layers [first, last] of one pipeline stage: their own K/V plus a copy of each earlier layer's K/V
  // that one of them reads (Gemma 4 sharing across the stage boundary), as kv_cache_config counts it.
  uint64_t stage_kv_cache_bytes(int64_t first, int64_t last, int64_t n_ctx) const;
};

// From a file's tensor table. kv_type is the cache type (F16 or F32).
ModelCost model_cost_from_file(const gguf::GgufFile& file, const ModelConfig& config, GgmlType kv_type,
                               std::string label);
// From hyperparameters and a quant mix, with each tensor's type chosen exactly as gen-model would write it.
ModelCost model_cost_from_shape(const ModelConfig& config, const QuantMix& mix, GgmlType kv_type, std::string label);

struct ShapePreset {
  std::string_view name;     // "qwen2.5-7b"
  std::string_view display;  // "Qwen2.5-7B"
  ModelConfig config;
};
// Popular models' hyperparameters (Llama 3, Qwen2.5, Qwen3, Qwen3 MoE, Mixtral, Gemma 3, Gemma 4; sources in
// docs/planner.md). Names are case-insensitive.
// Throws Error listing the valid names.
ShapePreset shape_preset(std::string_view name);
std::vector<ShapePreset> shape_presets();
std::string shape_preset_names();

}  // namespace tessera::plan
