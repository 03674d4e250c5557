// Reference attention: scores, softmax (two passes, as llama.cpp without flash attention), weighted sum of values.
// Work is split over (token, head) pairs; issue "CPU kernels" replaces it with a tiled online-softmax kernel.
#include "model/attention.h"

#include <cmath>
#include <vector>

#include "tensor/fp16.h"
#include "tensor/tensor_ops.h"

namespace tessera {
namespace {

inline float load(const uint8_t* base, bool f16, int64_t index) {
  return f16 ? fp16_to_fp32(reinterpret_cast<const uint16_t*>(base)[index])
             : reinterpret_cast<const float*>(base)[index];
}

}  // namespace

void attention(const AttentionShape& s, const KvCache& cache, int64_t layer, const Batch& batch, const float* q,
               float* out, ThreadPool& pool) {
  const bool f16 = cache.config().type == GgmlType::F16;
  const int64_t n_embd_k = cache.config().n_embd_k;
  const int64_t n_embd_v = cache.config().n_embd_v;
  const int64_t group = s.n_head / s.n_head_kv;
  const float scale = 1.0f / std::sqrt(static_cast<float>(s.head_dim));
  const int64_t n_tokens = batch.size();

  pool.parallel_for(n_tokens * s.n_head, [&](int64_t begin, int64_t end) {
    std::vector<float> scores;
    std::vector<float> acc(static_cast<size_t>(s.head_dim_v));
    for (int64_t item = begin; item < end; ++item) {
      const int64_t t = item / s.n_head;
      const int64_t h = item % s.n_head;
      const int64_t kv_head = h / group;
      const int64_t n_pos = batch.pos[static_cast<size_t>(t)] + 1;
      const int64_t slot = batch.seq[static_cast<size_t>(t)];
      const uint8_t* k = cache.k_rows(layer, slot);
      const uint8_t* v = cache.v_rows(layer, slot);
      const float* qh = q + t * s.n_head * s.head_dim + h * s.head_dim;

      scores.resize(static_cast<size_t>(n_pos));
      for (int64_t p = 0; p < n_pos; ++p) {
        const int64_t base = p * n_embd_k + kv_head * s.head_dim;
        float dot = 0.0f;
        for (int64_t i = 0; i < s.head_dim; ++i) dot += qh[i] * load(k, f16, base + i);
        scores[static_cast<size_t>(p)] = dot * scale;
      }
      softmax(scores.data(), n_pos);

      std::fill(acc.begin(), acc.end(), 0.0f);
      for (int64_t p = 0; p < n_pos; ++p) {
        const float w = scores[static_cast<size_t>(p)];
        const int64_t base = p * n_embd_v + kv_head * s.head_dim_v;
        for (int64_t i = 0; i < s.head_dim_v; ++i) acc[static_cast<size_t>(i)] += w * load(v, f16, base + i);
      }
      float* o = out + t * s.n_head * s.head_dim_v + h * s.head_dim_v;
      for (int64_t i = 0; i < s.head_dim_v; ++i) o[i] = acc[static_cast<size_t>(i)];
    }
  });
}

}  // namespace tessera
