// The scalar path: quant.h's reference activation quantizers and dot products behind the Kernels signatures,
// plus f32-activation dots for F16/BF16 weights and the generic gemm. Correct everywhere, and the fallback.
#include <cstring>

#include "tensor/fp16.h"
#include "tensor/kernels/registry.h"
#include "tensor/quant.h"

namespace tessera::kernels {
namespace {

template <GgmlType Act>
void quantize_act(const float* x, void* y, int64_t n) {
  quantize_row_activation(Act, x, y, n);
}

template <GgmlType Weight>
float dot_ref(const void* w, const void* x, int64_t n) {
  return vec_dot_row(Weight, w, x, n);
}

// Kernels keeps activations f32 for F16/BF16 weights (quant.h's reference rounds them to the weight type),
// so these two widen the weight and accumulate in double, like the F32 reference.
float dot_f16_f32(const void* w, const void* x, int64_t n) {
  const auto* wh = static_cast<const uint16_t*>(w);
  const auto* xf = static_cast<const float*>(x);
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(fp16_to_fp32(wh[i])) * xf[i];
  return static_cast<float>(sum);
}

float dot_bf16_f32(const void* w, const void* x, int64_t n) {
  const auto* wh = static_cast<const uint16_t*>(w);
  const auto* xf = static_cast<const float*>(x);
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(bf16_to_fp32(wh[i])) * xf[i];
  return static_cast<float>(sum);
}

template <GgmlType Weight>
constexpr VecDotFn kRefDot = &dot_ref<Weight>;

// One vec_dot per (row, token); rows outer so a weight row stays in L1 while it meets every token.
template <VecDotFn Dot>
void gemm_by_dot(const uint8_t* w, size_t w_stride, int64_t n_rows, const uint8_t* x, size_t x_stride, int64_t n_tok,
                 int64_t k, float* y, int64_t ldy) {
  for (int64_t r = 0; r < n_rows; ++r) {
    const uint8_t* wr = w + static_cast<size_t>(r) * w_stride;
    for (int64_t t = 0; t < n_tok; ++t) y[t * ldy + r] = Dot(wr, x + static_cast<size_t>(t) * x_stride, k);
  }
}

ActQuantFn find_quantize_act(GgmlType act) {
  switch (act) {
    case GgmlType::F32:
      return &quantize_act<GgmlType::F32>;
    case GgmlType::F16:
      return &quantize_act<GgmlType::F16>;
    case GgmlType::BF16:
      return &quantize_act<GgmlType::BF16>;
    case GgmlType::Q8_0:
      return &quantize_act<GgmlType::Q8_0>;
    case GgmlType::Q8_1:
      return &quantize_act<GgmlType::Q8_1>;
    case GgmlType::Q8_K:
      return &quantize_act<GgmlType::Q8_K>;
    default:
      return nullptr;
  }
}

#define TESSERA_REF_TYPES(X) \
  X(F32)                     \
  X(Q4_0)                    \
  X(Q4_1)                    \
  X(Q5_0)                    \
  X(Q5_1)                    \
  X(Q8_0)                    \
  X(Q8_1)                    \
  X(Q2_K)                    \
  X(Q3_K)                    \
  X(Q4_K)                    \
  X(Q5_K)                    \
  X(Q6_K)                    \
  X(Q8_K)                    \
  X(IQ4_NL)                  \
  X(IQ4_XS)

VecDotFn find_vec_dot(GgmlType weight) {
  switch (weight) {
#define TESSERA_CASE(T) \
  case GgmlType::T:     \
    return kRefDot<GgmlType::T>;
    TESSERA_REF_TYPES(TESSERA_CASE)
#undef TESSERA_CASE
    case GgmlType::F16:
      return &dot_f16_f32;
    case GgmlType::BF16:
      return &dot_bf16_f32;
    default:
      return nullptr;
  }
}

GemmFn find_gemm(GgmlType weight) {
  switch (weight) {
#define TESSERA_CASE(T) \
  case GgmlType::T:     \
    return &gemm_by_dot<kRefDot<GgmlType::T>>;
    TESSERA_REF_TYPES(TESSERA_CASE)
#undef TESSERA_CASE
    case GgmlType::F16:
      return &gemm_by_dot<&dot_f16_f32>;
    case GgmlType::BF16:
      return &gemm_by_dot<&dot_bf16_f32>;
    default:
      return nullptr;
  }
}

#undef TESSERA_REF_TYPES

}  // namespace

const IsaKernels& scalar_kernels() {
  static const IsaKernels k{&find_quantize_act, &find_vec_dot, &find_gemm, nullptr, nullptr, &scalar_ops(), nullptr};
  return k;
}

}  // namespace tessera::kernels
