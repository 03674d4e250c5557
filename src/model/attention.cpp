// Attention per (token, KV head): the query heads that share a KV head are handled together, so each cached key
// and value row is converted from f16 once and used by the whole group. Softmax is two-pass over the scores, as
// llama.cpp computes it without flash attention.
#include "model/attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "tensor/tensor_ops.h"

namespace tessera {

void attention(const AttentionShape& s, const KvCache& cache, int64_t layer, const Batch& batch, const float* q,
               float* out, ThreadPool& pool, const VecOps& ops) {
  const bool f16 = cache.config().type == GgmlType::F16;
  const int64_t n_embd_k = cache.config().n_embd_k;
  const int64_t n_embd_v = cache.config().n_embd_v;
  const int64_t group = s.n_head / s.n_head_kv;
  const float scale = 1.0f / std::sqrt(static_cast<float>(s.head_dim));
  const int64_t n_tokens = batch.size();

  pool.parallel_for(n_tokens * s.n_head_kv, [&](int64_t begin, int64_t end) {
    std::vector<float> scores;
    std::vector<float> krow(static_cast<size_t>(s.head_dim));
    std::vector<float> vrow(static_cast<size_t>(s.head_dim_v));
    for (int64_t item = begin; item < end; ++item) {
      const int64_t t = item / s.n_head_kv;
      const int64_t g = item % s.n_head_kv;
      const int64_t n_pos = batch.pos[static_cast<size_t>(t)] + 1;
      const int64_t slot = batch.seq[static_cast<size_t>(t)];
      const uint8_t* k = cache.k_rows(layer, slot);
      const uint8_t* v = cache.v_rows(layer, slot);
      const float* qg = q + (t * s.n_head + g * group) * s.head_dim;
      float* og = out + (t * s.n_head + g * group) * s.head_dim_v;

      scores.resize(static_cast<size_t>(group * n_pos));
      for (int64_t p = 0; p < n_pos; ++p) {
        const int64_t at = p * n_embd_k + g * s.head_dim;
        const float* kp = reinterpret_cast<const float*>(k) + at;
        if (f16) {
          ops.f16_to_f32(reinterpret_cast<const uint16_t*>(k) + at, krow.data(), s.head_dim);
          kp = krow.data();
        }
        for (int64_t j = 0; j < group; ++j) {
          scores[static_cast<size_t>(j * n_pos + p)] = ops.dot(qg + j * s.head_dim, kp, s.head_dim) * scale;
        }
      }
      for (int64_t j = 0; j < group; ++j) softmax(scores.data() + j * n_pos, n_pos);

      std::fill(og, og + group * s.head_dim_v, 0.0f);
      for (int64_t p = 0; p < n_pos; ++p) {
        const int64_t at = p * n_embd_v + g * s.head_dim_v;
        const float* vp = reinterpret_cast<const float*>(v) + at;
        if (f16) {
          ops.f16_to_f32(reinterpret_cast<const uint16_t*>(v) + at, vrow.data(), s.head_dim_v);
          vp = vrow.data();
        }
        for (int64_t j = 0; j < group; ++j) {
          ops.axpy(scores[static_cast<size_t>(j * n_pos + p)], vp, og + j * s.head_dim_v, s.head_dim_v);
        }
      }
    }
  });
}

}  // namespace tessera
