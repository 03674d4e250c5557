// Reference matmul: activations converted once per call, output rows split across the pool's threads.
// The SIMD kernels of issue "CPU kernels" replace the inner dot while keeping this contract.
#include "tensor/matmul.h"

#include <algorithm>

#include "tensor/quant.h"
#include "util/error.h"

namespace tessera {
namespace {

bool float_weights(GgmlType t) { return t == GgmlType::F32 || t == GgmlType::F16 || t == GgmlType::BF16; }

}  // namespace

void matmul(const TensorView& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool,
            MatmulScratch& scratch) {
  const int64_t k = w.cols();
  const int64_t n = w.rows();
  if (float_weights(w.type)) {
    pool.run([&](int thread) {
      const int64_t begin = n * thread / pool.size();
      const int64_t end = n * (thread + 1) / pool.size();
      std::vector<float> row(static_cast<size_t>(k));
      for (int64_t r = begin; r < end; ++r) {
        const float* wr = reinterpret_cast<const float*>(w.row(r));
        if (w.type != GgmlType::F32) {
          dequantize_row(w.type, w.row(r), row.data(), k);
          wr = row.data();
        }
        for (int64_t t = 0; t < n_tokens; ++t) {
          const float* xt = x + t * k;
          float sum = 0.0f;
          for (int64_t i = 0; i < k; ++i) sum += wr[i] * xt[i];
          y[t * n + r] = sum;
        }
      }
    });
    return;
  }

  const GgmlType act_type = vec_dot_type(w.type);
  const size_t act_row = row_size(act_type, k);
  scratch.act.resize(act_row * static_cast<size_t>(n_tokens));
  pool.parallel_for(n_tokens, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      quantize_row_activation(act_type, x + t * k, scratch.act.data() + static_cast<size_t>(t) * act_row, k);
    }
  });
  pool.parallel_for(n, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      for (int64_t t = 0; t < n_tokens; ++t) {
        y[t * n + r] = vec_dot_row(w.type, w.row(r), scratch.act.data() + static_cast<size_t>(t) * act_row, k);
      }
    }
  });
}

}  // namespace tessera
