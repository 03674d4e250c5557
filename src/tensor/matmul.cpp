// matmul: activations converted once per call (split over threads by token), then output rows split over threads
// in multiples of 64, each thread running the CPU's gemm kernel on its rows for all tokens.
#include "tensor/matmul.h"

#include <algorithm>

#include "tensor/kernels.h"
#include "util/error.h"

namespace tessera {

void matmul(const TensorView& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool,
            MatmulScratch& scratch) {
  if (scratch.kernels == nullptr) scratch.kernels = &Kernels::get(select_isa());
  const Kernels& kernels = *scratch.kernels;
  const int64_t k = w.cols();
  const int64_t n = w.rows();
  const GgmlType act_type = Kernels::act_type(w.type);
  const size_t act_row = row_size(act_type, k);
  const ActQuantFn quantize = kernels.quantize_act(act_type);
  const GemmFn gemm = kernels.gemm(w.type);
  if (quantize == nullptr || gemm == nullptr) fail("no kernel for {} weights", type_name(w.type));

  scratch.act.resize(act_row * static_cast<size_t>(n_tokens));
  pool.parallel_for(n_tokens, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) quantize(x + t * k, scratch.act.data() + static_cast<size_t>(t) * act_row, k);
  });
  // Row chunks are multiples of 64 so every kernel works on whole register panels.
  const int64_t chunks = (n + 63) / 64;
  pool.parallel_for(chunks, [&](int64_t begin, int64_t end) {
    const int64_t r0 = begin * 64;
    const int64_t r1 = std::min(n, end * 64);
    gemm(w.row(r0), w.row_bytes, r1 - r0, scratch.act.data(), act_row, n_tokens, k, y + r0, n);
  });
}

}  // namespace tessera
