// The AVX2 path's registration: its files' lookups as one IsaKernels (registry.h), constant-initialized (no code
// compiled with this path's flags runs to fill it).
#include "tensor/kernels/registry.h"
#include "tensor/kernels/x86/avx2/common.h"

namespace tessera::kernels {
namespace avx2 {

VecDotFn quant_vec_dot(GgmlType weight) {
  if (VecDotFn f = legacy_vec_dot(weight)) return f;
  return kquant_vec_dot(weight);
}

namespace {

VecDotFn vec_dot(GgmlType weight) {
  if (VecDotFn f = float_vec_dot(weight)) return f;
  return quant_vec_dot(weight);
}

GemmFn gemm(GgmlType weight) {
  if (GemmFn f = float_gemm(weight)) return f;
  return quant_gemm(weight);
}

const PackedGemm* panels(GgmlType weight) {
  if (const PackedGemm* p = q4k_panels(weight)) return p;
  if (const PackedGemm* p = k16_panels(weight)) return p;
  return legacy_panels(weight);
}

}  // namespace
}  // namespace avx2

const IsaKernels& avx2_kernels() {
  static constexpr IsaKernels k{&avx2::quantize_act, &avx2::vec_dot, &avx2::gemm,        nullptr,
                                &avx2::panels,       &avx2::kOps,    &avx2::kStreamProbe};
  return k;
}

}  // namespace tessera::kernels
