// The attention's vector routines (f16 rows of the KV cache to f32 and back, the block update of attention_tile.h),
// with SIMD versions chosen at run time like the matmul kernels.
#pragma once

#include <cstdint>

#include "tensor/attention_tile.h"
#include "tensor/kernels.h"

namespace tessera {

struct VecOps {
  void (*f16_to_f32)(const uint16_t* x, float* y, int64_t n);
  void (*f32_to_f16)(const float* x, uint16_t* y, int64_t n);  // rounding to nearest even, as fp32_to_fp16
  AttnUpdateFn attend;                                         // attention_tile.h

  static const VecOps& get(Isa isa);
};

}  // namespace tessera
