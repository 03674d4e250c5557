// Causal multi-head attention (grouped-query) of a batch against each token's sequence history in the KV cache.
#pragma once

#include <cstdint>
#include <memory>
#include <new>
#include <vector>

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
  float scale = 0.0f;  // of q.k before the softmax; 0: 1/sqrt(head_dim)
  int64_t window = 0;  // sliding window: a query at p sees keys p - window + 1 .. p; 0: every earlier key
  // A tensor-parallel rank's part of the heads: query head q0 + i reads KV head (q0 + i) / group, held here as
  // KV head index (q0 + i) / group - kv0. group 0: n_head / n_head_kv (all heads held).
  int64_t group = 0;
  int64_t q_head0 = 0;
  int64_t kv_head0 = 0;
};

// 64-byte aligned floats for the attention's vector loads; grows, never shrinks.
class AlignedFloats {
 public:
  float* get(size_t n);

 private:
  struct Free {
    void operator()(float* p) const { ::operator delete[](p, std::align_val_t{64}); }
  };
  std::unique_ptr<float[], Free> p_;
  size_t n_ = 0;
};

// Each thread's query rows and converted key/value blocks, kept from call to call: a decode step attends once per
// layer, and allocating them per call is a visible share of the attention's time at short contexts.
struct AttentionScratch {
  struct Thread {
    // The item's scaled query rows, outputs, maxima and sums; a key block, as rows and transposed.
    AlignedFloats q, o, ml, keys, values, keys_t;
    std::vector<int32_t> pos;
  };
  std::vector<Thread> threads;
};

// q: [n_tokens][n_head * head_dim] (already rotated); out: [n_tokens][n_head * head_dim_v].
// Token t attends to positions [0, batch.pos[t]] of its sequence (the window's last ones on a sliding layer) in
// cache entry `layer`; the cache must already hold them.
void attention(const AttentionShape& shape, const KvCache& cache, int64_t layer, const Batch& batch, const float* q,
               float* out, ThreadPool& pool, const VecOps& ops, AttentionScratch& scratch);
// The same with a scratch of its own.
void attention(const AttentionShape& shape, const KvCache& cache, int64_t layer, const Batch& batch, const float* q,
               float* out, ThreadPool& pool, const VecOps& ops);

}  // namespace tessera
