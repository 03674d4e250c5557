// The probe's AVX2 loops (StreamProbeFns), plus the 256-bit AVX-VNNI dot product: a target attribute of its own,
// as it is beyond the path's flags (the probe calls it only where CpuFeatures::avx_vnni).
#include "tensor/kernels/x86/avx2/common.h"
#include "tensor/kernels/x86/stream_prefetch.h"

namespace tessera::kernels::avx2 {
namespace {

constexpr size_t kReadBlockWords = StreamProbeFns::kBlockWords;

constexpr size_t kBurstWords = kPrefetchBurstBytes / sizeof(uint64_t);
static_assert(kBurstWords % kReadBlockWords == 0);

// Hides a register's value from the optimiser at no run-time cost, so loop bodies cannot be folded or hoisted.
inline void opaque(__m256i& v) { asm volatile("" : "+x"(v)); }
inline void opaque(__m256& v) { asm volatile("" : "+x"(v)); }

uint64_t sum_epi32(__m256i v) {
  alignas(32) uint32_t lanes[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), v);
  uint64_t s = 0;
  for (uint32_t x : lanes) s += x;
  return s;
}

// kFar: 0 for plain loads, else prefetchnta that far ahead: a read block's lines each step, or with kBurst a
// burst's lines every kPrefetchBurstBytes (as the AVX-512 panels of the 32-element formats ask for them).
template <int kFar, bool kBurst = false>
uint64_t xor_words(const uint64_t* p, size_t n) {
  __m256i a[8];
  for (auto& v : a) v = _mm256_setzero_si256();
  for (size_t i = 0; i < n; i += kReadBlockWords) {
    const __m256i* q = reinterpret_cast<const __m256i*>(p + i);
    if constexpr (kBurst) {
      if (i % kBurstWords == 0) prefetch_stream<kPrefetchBurstBytes, kFar>(q);
    } else if constexpr (kFar > 0) {
      prefetch_stream<448, kFar>(q);
    }
    // 512 bytes per step as 16 loads into 8 independent accumulators.
    for (int j = 0; j < 8; ++j) {
      a[j] = _mm256_xor_si256(a[j], _mm256_loadu_si256(q + 2 * j));
      a[j] = _mm256_xor_si256(a[j], _mm256_loadu_si256(q + 2 * j + 1));
    }
  }
  __m256i x = a[0];
  for (int j = 1; j < 8; ++j) x = _mm256_xor_si256(x, a[j]);
  alignas(32) uint64_t lanes[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), x);
  return lanes[0] ^ lanes[1] ^ lanes[2] ^ lanes[3];
}

uint64_t xor_plain(const uint64_t* p, size_t n) { return xor_words<0>(p, n); }
uint64_t xor_nta(const uint64_t* p, size_t n) { return xor_words<kPrefetchFarBytes>(p, n); }
uint64_t xor_far(const uint64_t* p, size_t n) { return xor_words<2 * kPrefetchFarBytes>(p, n); }
uint64_t xor_burst(const uint64_t* p, size_t n) { return xor_words<kPrefetchFarBytes, true>(p, n); }

uint64_t int8_dot(uint64_t iters) {
  // u8 x s8 pairs summed to s16 (vpmaddubsw), pairs of s16 summed to s32 (vpmaddwd by 1), accumulated: the
  // sequence ggml-style AVX2 int8 kernels use. Eight chains: the add is the only loop-carried step.
  __m256i ones8 = _mm256_set1_epi8(1);
  const __m256i ones16 = _mm256_set1_epi16(1);
  __m256i acc[8];
  for (auto& a : acc) a = _mm256_setzero_si256();
  for (uint64_t i = 0; i < iters; ++i) {
    opaque(ones8);
    for (auto& a : acc) {
      a = _mm256_add_epi32(a, _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, ones8), ones16));
    }
  }
  uint64_t s = 0;
  for (const auto& a : acc) s += sum_epi32(a);
  return s;
}

__attribute__((target("avxvnni"))) uint64_t int8_dot_avx_vnni(uint64_t iters) {
  __m256i ones = _mm256_set1_epi8(1);
  __m256i acc[12];
  for (auto& a : acc) a = _mm256_setzero_si256();
  for (uint64_t i = 0; i < iters; ++i) {
    opaque(ones);
    for (auto& a : acc) a = _mm256_dpbusd_avx_epi32(a, ones, ones);
  }
  uint64_t s = 0;
  for (const auto& a : acc) s += sum_epi32(a);
  return s;
}

uint64_t f32_fma(uint64_t iters) {
  __m256 one = _mm256_set1_ps(1.0f);
  __m256 acc[12];
  for (auto& a : acc) a = _mm256_setzero_ps();
  for (uint64_t i = 0; i < iters; ++i) {
    opaque(one);
    for (auto& a : acc) a = _mm256_fmadd_ps(a, one, one);
  }
  alignas(32) float lanes[8];
  double s = 0;
  for (const auto& a : acc) {
    _mm256_store_ps(lanes, a);
    for (float x : lanes) s += static_cast<double>(x);
  }
  return static_cast<uint64_t>(s);
}

}  // namespace

constexpr StreamProbeFns kStreamProbe{&xor_plain, &xor_nta,           &xor_far, &xor_burst,
                                      &int8_dot,  &int8_dot_avx_vnni, &f32_fma};

}  // namespace tessera::kernels::avx2
