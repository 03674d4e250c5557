// Causal multi-head attention (grouped-query) of a batch against each token's sequence history in the KV cache.
#pragma once

#include <cstdint>

#include "model/batch.h"
#include "model/kv_cache.h"
#include "tensor/vec_ops.h"
#include "util/thread_pool.h"

namespace tessera {

struct AttentionShape {
  int64_t n_head = 0;
  int64_t n_head_kv = 0;
  int64_t head_dim = 0;
  int64_t head_dim_v = 0;
};

// q: [n_tokens][n_head * head_dim] (already rotated); out: [n_tokens][n_head * head_dim_v].
// Token t attends to positions [0, batch.pos[t]] of its sequence; the cache must already hold them.
void attention(const AttentionShape& shape, const KvCache& cache, int64_t layer, const Batch& batch, const float* q,
               float* out, ThreadPool& pool, const VecOps& ops);

}  // namespace tessera
