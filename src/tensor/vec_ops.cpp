// VecOps: scalar, AVX2 (+F16C, FMA) and AVX-512 versions, compiled per function with target attributes so the
// rest of the file (and program) stays baseline x86-64; callers only reach a version the CPU supports.
#include "tensor/vec_ops.h"

#include "tensor/fp16.h"
#include "tensor/simd_math.h"

namespace tessera {
namespace {

void f16_to_f32_scalar(const uint16_t* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = fp16_to_fp32(x[i]);
}

void f32_to_f16_scalar(const float* x, uint16_t* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = fp32_to_fp16(x[i]);
}

TESSERA_AVX2 void f32_to_f16_avx2(const float* x, uint16_t* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
  }
  for (; i < n; ++i) y[i] = fp32_to_fp16(x[i]);
}

TESSERA_AVX512 void f32_to_f16_avx512(const float* x, uint16_t* y, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + i),
                        _mm512_cvtps_ph(_mm512_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
  }
  for (; i < n; ++i) y[i] = fp32_to_fp16(x[i]);
}

TESSERA_AVX2 void f16_to_f32_avx2(const uint16_t* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i))));
  }
  for (; i < n; ++i) y[i] = fp16_to_fp32(x[i]);
}

TESSERA_AVX512 void f16_to_f32_avx512(const uint16_t* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    // The zero-masked form: GCC 12 warns inside the plain intrinsic (its header reads an undefined vector).
    _mm512_storeu_ps(y + i, _mm512_maskz_cvtph_ps(0xFFFF, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i))));
  }
  for (; i < n; ++i) y[i] = fp16_to_fp32(x[i]);
}

constexpr VecOps kScalar{f16_to_f32_scalar, f32_to_f16_scalar, attend_scalar};
constexpr VecOps kAvx2{f16_to_f32_avx2, f32_to_f16_avx2, attend_avx2};
constexpr VecOps kAvx512{f16_to_f32_avx512, f32_to_f16_avx512, attend_avx512};

}  // namespace

const VecOps& VecOps::get(Isa isa) {
  switch (isa) {
    case Isa::Avx512:
      return kAvx512;
    case Isa::Avx2:
      return kAvx2;
    case Isa::Scalar:
      break;
  }
  return kScalar;
}

}  // namespace tessera
