// What a stage holds besides its weights and KV cache: f32 activation buffers for its largest micro-batch, the
// same estimate the planner makes (model/model_profile.h), so the head's memory table and --mem-limit agree.
#pragma once

#include <algorithm>
#include <cstdint>

#include "model/model_config.h"

namespace tessera::cluster {

// Residual, norm, q/k/v, attention out, FFN hidden x2 and a row of attention scores per token; logits per token
// only on the stage with the output head.
inline uint64_t stage_buffer_bytes(const ModelConfig& c, int64_t max_batch, int64_t n_ctx, bool has_head) {
  const int64_t ffn = std::max(c.n_ff, c.n_ff_exp * std::max<int64_t>(c.n_expert_used, 1));
  const int64_t per_token =
      3 * c.n_embd + c.n_embd_q() + c.n_embd_k() + c.n_embd_v() + 2 * ffn + n_ctx + (has_head ? c.n_vocab : 0);
  return static_cast<uint64_t>(std::max<int64_t>(max_batch, 1)) * static_cast<uint64_t>(per_token) * 4;
}

}  // namespace tessera::cluster
