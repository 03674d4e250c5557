// Per-ISA kernel lookups that kernel_tables.cpp assembles into Kernels tables. A lookup returns nullptr where its
// path has no kernel of its own for that type; the table then falls back to a slower path.
#pragma once

#include "tensor/kernels.h"

namespace tessera::kernels {

ActQuantFn scalar_quantize_act(GgmlType act);
VecDotFn scalar_vec_dot(GgmlType weight);
GemmFn scalar_gemm(GgmlType weight);

ActQuantFn avx2_quantize_act(GgmlType act);
VecDotFn avx2_vec_dot(GgmlType weight);
GemmFn avx2_gemm(GgmlType weight);
const PackedGemm* avx2_panels(GgmlType weight);

ActQuantFn avx512_quantize_act(GgmlType act);
VecDotFn avx512_vec_dot(GgmlType weight);
GemmFn avx512_gemm(GgmlType weight);
const PackedGemm* avx512_packed(GgmlType weight);
const PackedGemm* avx512_panels(GgmlType weight);

}  // namespace tessera::kernels
