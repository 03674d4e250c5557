// The AVX-512 path's registration: its files' lookups as one IsaKernels (registry.h), constant-initialized (no code
// compiled with this path's flags runs to fill it).
#include "tensor/kernels/registry.h"
#include "tensor/kernels/x86/avx512/common.h"

namespace tessera::kernels {
namespace avx512 {
namespace {

VecDotFn vec_dot(GgmlType weight) {
  if (VecDotFn f = float_vec_dot(weight)) return f;
  if (VecDotFn f = legacy_vec_dot(weight)) return f;
  return kquant_vec_dot(weight);
}

GemmFn gemm(GgmlType weight) {
  if (GemmFn f = float_gemm(weight)) return f;
  return quant_gemm(weight);
}

const PackedGemm* panels(GgmlType weight) {
  if (const PackedGemm* p = kquant_panels(weight)) return p;
  if (const PackedGemm* p = k16_panels(weight)) return p;
  return legacy_panels(weight);
}

}  // namespace
}  // namespace avx512

const IsaKernels& avx512_kernels() {
  static constexpr IsaKernels k{&avx512::quantize_act, &avx512::vec_dot, &avx512::gemm,        &avx512::quant_packed,
                                &avx512::panels,       &avx512::kOps,    &avx512::kStreamProbe};
  return k;
}

}  // namespace tessera::kernels
