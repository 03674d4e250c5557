// Hyperparameters of a model, read from (and written to) GGUF metadata with validation and defaults.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "model/arch.h"

namespace tessera {

enum class RopeScaling { None, Linear, Yarn };

// One layer's shape. Gemma's layers differ (sliding-window or global attention with their own head sizes, KV head
// counts, rope and FFN sizes; late layers that attend to an earlier layer's K/V); other architectures repeat one.
struct LayerShape {
  int64_t n_head = 0;
  int64_t n_head_kv = 0;
  int64_t head_dim = 0;    // key/query head size
  int64_t head_dim_v = 0;  // value head size
  int64_t n_rot = 0;
  int64_t n_ff = 0;       // dense FFN (the shared MLP beside a Gemma 4 MoE)
  int64_t n_ff_exp = 0;   // each expert's FFN rows (MoE)
  int64_t n_expert = 0;   // experts this layer holds (a rank under expert parallelism holds some)
  int64_t window = 0;     // sliding window in positions (a query sees this many keys, itself included); 0: global
  int64_t kv_source = 0;  // the layer whose K/V this layer attends to: itself, or an earlier one (Gemma 4 sharing)
  float rope_base = 10000.0f;
  float rope_freq_scale = 1.0f;
  bool rope_factors = false;  // rope_freqs.weight divides this layer's angles (Gemma 4 global layers)
  bool moe = false;
  bool has_v = true;  // false: V is taken from the raw K (Gemma 4 global layers without attn_v)

  bool is_swa() const { return window > 0; }
  int64_t n_embd_q() const { return n_head * head_dim; }
  int64_t n_embd_k() const { return n_head_kv * head_dim; }
  int64_t n_embd_v() const { return n_head_kv * head_dim_v; }
};

struct ModelConfig {
  Arch arch = Arch::Llama;
  std::string arch_name = "llama";
  std::string name;
  int64_t n_vocab = 0;
  int64_t n_ctx_train = 0;
  int64_t n_embd = 0;
  int64_t n_layer = 0;
  int64_t n_head = 0;
  int64_t n_head_kv = 0;
  int64_t head_dim = 0;    // key/query head size
  int64_t head_dim_v = 0;  // value head size
  int64_t n_ff = 0;        // dense FFN size
  int64_t n_expert = 0;    // 0 for dense models
  int64_t n_expert_used = 0;
  int64_t n_ff_exp = 0;  // expert FFN size
  int64_t n_rot = 0;     // dimensions RoPE rotates per head
  float rope_freq_base = 10000.0f;
  float rope_freq_scale = 1.0f;  // 1 / linear scaling factor
  RopeScaling rope_scaling = RopeScaling::None;
  int64_t rope_orig_ctx = 0;
  float rms_eps = 1e-5f;
  bool tied_output = false;     // no output.weight: the token embedding is reused
  bool has_rope_freqs = false;  // rope_freqs.weight (Llama 3 frequency factors)

  // Gemma. Sliding-window attention: n_swa positions on the layers the pattern marks (gemma3: a period of
  // swa_period layers whose last is global; gemma4: one flag per layer).
  int64_t n_swa = 0;
  int64_t swa_period = 0;
  std::vector<bool> swa_layers;  // gemma4's attention.sliding_window_pattern
  float rope_freq_base_swa = 10000.0f;
  int64_t head_dim_swa = 0;  // gemma4: sliding layers' head size (key_length_swa)
  int64_t n_rot_swa = 0;
  std::vector<int64_t> n_head_kv_layers;  // gemma4: per-layer KV head counts (empty: n_head_kv everywhere)
  std::vector<int64_t> n_ff_layers;       // gemma4: per-layer FFN sizes (empty: n_ff everywhere)
  int64_t shared_kv_layers = 0;           // gemma4: the last layers reuse an earlier layer's K/V
  int64_t n_embd_per_layer = 0;           // gemma4: per-layer input embedding width (0: none)
  bool attn_k_eq_v = false;               // gemma4: global layers have no attn_v (V is the raw K)
  float final_logit_softcap = 0.0f;       // logits = c tanh(logits / c) when > 0

  bool is_moe() const { return n_expert > 0; }
  RopeStyle rope_style() const { return arch_info(arch).rope; }
  int64_t n_embd_q() const { return n_head * head_dim; }
  int64_t n_embd_k() const { return n_head_kv * head_dim; }
  int64_t n_embd_v() const { return n_head_kv * head_dim_v; }
  // Layer il's shape, derived from the fields above (every layer alike outside Gemma).
  LayerShape layer(int64_t il) const;
  // The scale of q.k before the softmax: 1/sqrt(head_dim) (Gemma 3 27B: 1/sqrt(n_embd/n_head); Gemma 4: 1).
  float attention_scale(const LayerShape& l) const;
  // The first layer whose K/V is reused by later layers (n_layer when none is).
  int64_t kv_share_start() const { return n_layer - shared_kv_layers; }
  // The layers before `boundary` whose K/V some layer at or after it reads: a pipeline carries their K/V rows
  // across that boundary with the hidden state.
  std::vector<int64_t> kv_carried_across(int64_t boundary) const;
  // Floats per token crossing a stage boundary before layer `boundary`: the hidden state, the per-layer inputs of
  // the layers after it (Gemma 4) and the carried K/V rows.
  int64_t boundary_width(int64_t boundary) const;

  // Reads `<arch>.*` keys; tensors give the vocab size and the tied-output flag when metadata does not.
  // Throws Error naming the file and the key for a missing, mistyped or out-of-range value.
  static ModelConfig from_gguf(const gguf::TensorSource& file);
  // Writes the keys from_gguf reads (used by gen-model).
  void to_metadata(gguf::Metadata& md) const;
  // Checks internal consistency (head counts divide, sizes positive and sane); throws Error.
  void validate(const std::string& where) const;

 private:
  void validate_gemma(const std::string& where) const;
};

std::string_view rope_scaling_name(RopeScaling s);

}  // namespace tessera
