// ISA-neutral kernel templates. Each ISA's translation unit instantiates them with its own vec_dot, so every
// instantiation is a distinct symbol compiled with that file's target flags (no cross-ISA inline sharing).
#pragma once

#include <cstddef>
#include <cstdint>

#include "tensor/kernels.h"

namespace tessera::kernels {

// The fallback GemmFn: one vec_dot per (row, token). Rows are the outer loop so a weight row stays in L1 while
// it meets every token.
template <VecDotFn Dot>
void gemm_by_dot(const uint8_t* w, size_t w_stride, int64_t n_rows, const uint8_t* x, size_t x_stride, int64_t n_tok,
                 int64_t k, float* y, int64_t ldy) {
  for (int64_t r = 0; r < n_rows; ++r) {
    const uint8_t* wr = w + static_cast<size_t>(r) * w_stride;
    for (int64_t t = 0; t < n_tok; ++t) y[t * ldy + r] = Dot(wr, x + static_cast<size_t>(t) * x_stride, k);
  }
}

}  // namespace tessera::kernels
