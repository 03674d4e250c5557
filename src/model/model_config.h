// Hyperparameters of a model, read from (and written to) GGUF metadata with validation and defaults.
#pragma once

#include <cstdint>
#include <string>

#include "gguf/gguf_file.h"
#include "model/arch.h"

namespace tessera {

enum class RopeScaling { None, Linear, Yarn };

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

  bool is_moe() const { return n_expert > 0; }
  RopeStyle rope_style() const { return arch_info(arch).rope; }
  int64_t n_embd_q() const { return n_head * head_dim; }
  int64_t n_embd_k() const { return n_head_kv * head_dim; }
  int64_t n_embd_v() const { return n_head_kv * head_dim_v; }

  // Reads `<arch>.*` keys; tensors give the vocab size and the tied-output flag when metadata does not.
  // Throws Error naming the file and the key for a missing, mistyped or out-of-range value.
  static ModelConfig from_gguf(const gguf::TensorSource& file);
  // Writes the keys from_gguf reads (used by gen-model).
  void to_metadata(gguf::Metadata& md) const;
  // Checks internal consistency (head counts divide, sizes positive and sane); throws Error.
  void validate(const std::string& where) const;
};

std::string_view rope_scaling_name(RopeScaling s);

}  // namespace tessera
