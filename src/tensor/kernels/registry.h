// Each path's kernels as one registration (its register.cpp), which registry.cpp assembles into the Kernels tables.
// A lookup returns nullptr where its path has no kernel of its own for that type; the table then falls back to the
// next slower path (avx512 -> avx2 -> scalar).
#pragma once

#include "tensor/kernels.h"

namespace tessera::kernels {

struct IsaKernels {
  ActQuantFn (*quantize_act)(GgmlType act) = nullptr;
  VecDotFn (*vec_dot)(GgmlType weight) = nullptr;
  // From the same path as vec_dot: a path's generic gemm loops over its own vec_dot.
  GemmFn (*gemm)(GgmlType weight) = nullptr;
  // Layouts are a path's own: never taken from another path.
  const PackedGemm* (*packed)(GgmlType weight) = nullptr;
  const PackedGemm* (*panels)(GgmlType weight) = nullptr;
  // Each member falls back to the slower paths' where null.
  const OpsFns* ops = nullptr;
  // The path's own only; null on the scalar path.
  const StreamProbeFns* stream_probe = nullptr;
};

const IsaKernels& scalar_kernels();  // scalar/kernels.cpp
const OpsFns& scalar_ops();          // scalar/ops.cpp
#if defined(__x86_64__) || defined(__i386__)
const IsaKernels& avx2_kernels();    // x86/avx2/register.cpp
const IsaKernels& avx512_kernels();  // x86/avx512/register.cpp
#endif

}  // namespace tessera::kernels
