// The probe's AVX-512 loops (StreamProbeFns).
#include "tensor/kernels/x86/avx512/common.h"
#include "tensor/kernels/x86/stream_prefetch.h"

namespace tessera::kernels::avx512 {
namespace {

constexpr size_t kReadBlockWords = StreamProbeFns::kBlockWords;

constexpr size_t kBurstWords = kPrefetchBurstBytes / sizeof(uint64_t);
static_assert(kBurstWords % kReadBlockWords == 0);

// Hides a register's value from the optimiser at no run-time cost, so loop bodies cannot be folded or hoisted.
inline void opaque(__m512i& v) { asm volatile("" : "+v"(v)); }
inline void opaque(__m512& v) { asm volatile("" : "+v"(v)); }

uint64_t sum_epi32(__m512i v) {
  alignas(64) uint32_t lanes[16];
  _mm512_store_si512(lanes, v);
  uint64_t s = 0;
  for (uint32_t x : lanes) s += x;
  return s;
}

// kFar: 0 for plain loads, else prefetchnta that far ahead: a read block's lines each step, or with kBurst a
// burst's lines every kPrefetchBurstBytes (as the AVX-512 panels of the 32-element formats ask for them).
template <int kFar, bool kBurst = false>
uint64_t xor_words(const uint64_t* p, size_t n) {
  // Eight independent accumulators: the loads, not a dependency chain, set the pace.
  __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
  for (size_t i = 0; i < n; i += kReadBlockWords) {
    const __m512i* q = reinterpret_cast<const __m512i*>(p + i);
    if constexpr (kBurst) {
      if (i % kBurstWords == 0) prefetch_stream<kPrefetchBurstBytes, kFar>(q);
    } else if constexpr (kFar > 0) {
      prefetch_stream<448, kFar>(q);
    }
    a0 = _mm512_xor_si512(a0, _mm512_loadu_si512(q + 0));
    a1 = _mm512_xor_si512(a1, _mm512_loadu_si512(q + 1));
    a2 = _mm512_xor_si512(a2, _mm512_loadu_si512(q + 2));
    a3 = _mm512_xor_si512(a3, _mm512_loadu_si512(q + 3));
    a4 = _mm512_xor_si512(a4, _mm512_loadu_si512(q + 4));
    a5 = _mm512_xor_si512(a5, _mm512_loadu_si512(q + 5));
    a6 = _mm512_xor_si512(a6, _mm512_loadu_si512(q + 6));
    a7 = _mm512_xor_si512(a7, _mm512_loadu_si512(q + 7));
  }
  const __m512i x = _mm512_xor_si512(_mm512_xor_si512(_mm512_xor_si512(a0, a1), _mm512_xor_si512(a2, a3)),
                                     _mm512_xor_si512(_mm512_xor_si512(a4, a5), _mm512_xor_si512(a6, a7)));
  alignas(64) uint64_t lanes[8];
  _mm512_store_si512(lanes, x);
  uint64_t r = 0;
  for (uint64_t w : lanes) r ^= w;
  return r;
}

uint64_t xor_plain(const uint64_t* p, size_t n) { return xor_words<0>(p, n); }
uint64_t xor_nta(const uint64_t* p, size_t n) { return xor_words<kPrefetchFarBytes>(p, n); }
uint64_t xor_far(const uint64_t* p, size_t n) { return xor_words<2 * kPrefetchFarBytes>(p, n); }
uint64_t xor_burst(const uint64_t* p, size_t n) { return xor_words<kPrefetchFarBytes, true>(p, n); }

uint64_t int8_dot(uint64_t iters) {
  // vpdpbusd has a latency of ~5 cycles and issues up to twice per cycle: 12 chains keep the units busy.
  __m512i ones = _mm512_set1_epi8(1);
  __m512i acc[12];
  for (auto& a : acc) a = _mm512_setzero_si512();
  for (uint64_t i = 0; i < iters; ++i) {
    opaque(ones);
    for (auto& a : acc) a = _mm512_dpbusd_epi32(a, ones, ones);
  }
  uint64_t s = 0;
  for (const auto& a : acc) s += sum_epi32(a);
  return s;
}

uint64_t f32_fma(uint64_t iters) {
  // FMA: latency 4, two ports: 12 chains cover it with room to spare.
  __m512 one = _mm512_set1_ps(1.0f);
  __m512 acc[12];
  for (auto& a : acc) a = _mm512_setzero_ps();
  for (uint64_t i = 0; i < iters; ++i) {
    opaque(one);
    for (auto& a : acc) a = _mm512_fmadd_ps(a, one, one);
  }
  // Stored and summed in scalar code: GCC 12's _mm512_reduce_add_ps trips -Wuninitialized in its own header.
  alignas(64) float lanes[16];
  double s = 0;
  for (const auto& a : acc) {
    _mm512_store_ps(lanes, a);
    for (float x : lanes) s += static_cast<double>(x);
  }
  return static_cast<uint64_t>(s);
}

}  // namespace

constexpr StreamProbeFns kStreamProbe{&xor_plain, &xor_nta, &xor_far, &xor_burst, &int8_dot, nullptr, &f32_fma};

}  // namespace tessera::kernels::avx512
