// Small vector routines of the attention and row operations (f32, and f16 rows of the KV cache), with SIMD
// versions chosen at run time like the matmul kernels.
#pragma once

#include <cstdint>

#include "tensor/kernels.h"

namespace tessera {

struct VecOps {
  void (*f16_to_f32)(const uint16_t* x, float* y, int64_t n);
  float (*dot)(const float* a, const float* b, int64_t n);
  void (*axpy)(float a, const float* x, float* y, int64_t n);  // y += a * x

  static const VecOps& get(Isa isa);
};

}  // namespace tessera
