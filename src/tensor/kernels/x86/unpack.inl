// Gemm weight unpackers: one block of one row -> signed levels in element order plus per-group f32 scales (dsc)
// and mins (dmm; value = dsc * level - dmm); the K-quants also as integers (unpack_int). AVX2 intrinsics only;
// included inside each ISA's namespace. Needs from the including file: load128, load256, store256, load_u32,
// half_at, nibbles32, <cstring> and tensor/quant_blocks.h.

using quant::BlockIQ4_XS;
using quant::BlockQ2_K;
using quant::BlockQ3_K;
using quant::BlockQ4_K;
using quant::BlockQ5_K;
using quant::BlockQ6_K;
using quant::BlockQ8_K;

// Byte j = 0xff where bit j of `bits` is set.
inline __m256i unpack_bit_mask32(uint32_t bits) {
  const __m256i spread = _mm256_shuffle_epi8(
      _mm256_set1_epi32(static_cast<int>(bits)),
      _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
  const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
  return _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
}

// Q5_0/Q5_1 levels 0..31 (qh at byte kQh, qs at kQs).
template <int kQh, int kQs>
__m256i unpack_q5(const uint8_t* b) {
  const __m256i high = _mm256_and_si256(unpack_bit_mask32(load_u32(b + kQh)), _mm256_set1_epi8(16));
  return _mm256_or_si256(nibbles32(b + kQs), high);
}

// The signed IQ4_NL levels in both 128-bit lanes, for vpshufb.
inline __m256i unpack_iq4nl_table() {
  return _mm256_broadcastsi128_si256(
      _mm_setr_epi8(-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113));
}

struct LegacyBase {
  static constexpr int kBlock = 32;
  static constexpr int kGroup = 32;
  static constexpr bool kSuper = false;  // activations Q8_0/Q8_1: one scale per 32
};

struct GQ4_0 : LegacyBase {
  static constexpr GgmlType kType = GgmlType::Q4_0;
  static constexpr int kMaxAbs = 8;  // largest |signed level|
  static constexpr int kBytes = 18;
  static constexpr bool kMin = false;
  static void unpack(const uint8_t* b, int8_t* lv, float* dsc, float*) {
    store256(lv, _mm256_sub_epi8(nibbles32(b + 2), _mm256_set1_epi8(8)));
    dsc[0] = half_at(b);
  }
};
struct GQ4_1 : LegacyBase {
  static constexpr GgmlType kType = GgmlType::Q4_1;
  static constexpr int kMaxAbs = 15;  // largest |signed level|
  static constexpr int kBytes = 20;
  static constexpr bool kMin = true;
  static void unpack(const uint8_t* b, int8_t* lv, float* dsc, float* dmm) {
    store256(lv, nibbles32(b + 4));
    dsc[0] = half_at(b);
    dmm[0] = -half_at(b + 2);  // value = d * q + m
  }
};
struct GQ5_0 : LegacyBase {
  static constexpr GgmlType kType = GgmlType::Q5_0;
  static constexpr int kMaxAbs = 16;  // largest |signed level|
  static constexpr int kBytes = 22;
  static constexpr bool kMin = false;
  static void unpack(const uint8_t* b, int8_t* lv, float* dsc, float*) {
    store256(lv, _mm256_sub_epi8(unpack_q5<2, 6>(b), _mm256_set1_epi8(16)));
    dsc[0] = half_at(b);
  }
};
struct GQ5_1 : LegacyBase {
  static constexpr GgmlType kType = GgmlType::Q5_1;
  static constexpr int kMaxAbs = 31;  // largest |signed level|
  static constexpr int kBytes = 24;
  static constexpr bool kMin = true;
  static void unpack(const uint8_t* b, int8_t* lv, float* dsc, float* dmm) {
    store256(lv, unpack_q5<4, 8>(b));
    dsc[0] = half_at(b);
    dmm[0] = -half_at(b + 2);
  }
};
struct GQ8_0 : LegacyBase {
  static constexpr GgmlType kType = GgmlType::Q8_0;
  static constexpr int kMaxAbs = 128;  // largest |signed level|
  static constexpr int kBytes = 34;
  static constexpr bool kMin = false;
  static void unpack(const uint8_t* b, int8_t* lv, float* dsc, float*) {
    store256(lv, load256(b + 2));
    dsc[0] = half_at(b);
  }
};
struct GIQ4_NL : LegacyBase {
  static constexpr GgmlType kType = GgmlType::IQ4_NL;
  static constexpr int kMaxAbs = 127;  // largest |signed level|
  static constexpr int kBytes = 18;
  static constexpr bool kMin = false;
  static void unpack(const uint8_t* b, int8_t* lv, float* dsc, float*) {
    store256(lv, _mm256_shuffle_epi8(unpack_iq4nl_table(), nibbles32(b + 2)));
    dsc[0] = half_at(b);
  }
};

struct KBase {
  static constexpr int kBlock = 256;
  static constexpr bool kSuper = true;  // activations Q8_K: one scale per 256
};

// The K-quants unpack to integers first (unpack_int): unsigned levels u = level + kOffset in element order and the
// block's integer sub-block scales sc and mins mn with their super-scales, value = d * sc[g] * level - dmin * mn[g];
// unpack (the float form the other gemms use) derives from it.
struct KInts {
  alignas(32) uint8_t u[256];
  int16_t sc[16];
  int16_t mn[16];
  float d = 0.0f;
  float dmin = 0.0f;
};

template <class F>
void unpack_k_float(const uint8_t* p, int8_t* lv, float* dsc, float* dmm) {
  KInts k;
  F::unpack_int(p, k);
  for (int c = 0; c < 8; ++c)
    store256(lv + 32 * c, _mm256_sub_epi8(load256(k.u + 32 * c), _mm256_set1_epi8(F::kOffset)));
  for (int g = 0; g < 256 / F::kGroup; ++g) {
    dsc[g] = k.d * static_cast<float>(k.sc[g]);
    if constexpr (F::kMin) dmm[g] = k.dmin * static_cast<float>(k.mn[g]);
  }
}

// Bit `bit` of each byte of v, moved to bit `to`.
inline __m256i unpack_bit_plane(__m256i v, int bit, int to) {
  const __m256i b = _mm256_and_si256(_mm256_srli_epi16(v, bit), _mm256_set1_epi8(1));
  return _mm256_slli_epi16(b, to);
}

inline void k4_scales_bytes(const uint8_t* s, uint8_t* sc, uint8_t* mn) {
  const uint32_t a = load_u32(s), b = load_u32(s + 4), c = load_u32(s + 8);
  const uint32_t v[4] = {a & 0x3f3f3f3fu, (c & 0x0f0f0f0fu) | ((a >> 2) & 0x30303030u), b & 0x3f3f3f3fu,
                         ((c >> 4) & 0x0f0f0f0fu) | ((b >> 2) & 0x30303030u)};
  std::memcpy(sc, v, 8);
  std::memcpy(mn, v + 2, 8);
}

template <bool kFive, class B>
void unpack_q45_k(const B& b, KInts& k) {
  const __m256i m4 = _mm256_set1_epi8(0x0f);
  for (int c = 0; c < 4; ++c) {
    const __m256i q = load256(b.qs + 32 * c);
    __m256i lo = _mm256_and_si256(q, m4);
    __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
    if constexpr (kFive) {
      const __m256i qh = load256(b.qh);
      lo = _mm256_or_si256(lo, unpack_bit_plane(qh, 2 * c, 4));
      hi = _mm256_or_si256(hi, unpack_bit_plane(qh, 2 * c + 1, 4));
    }
    store256(k.u + 64 * c, lo);
    store256(k.u + 64 * c + 32, hi);
  }
  uint8_t sc[8], mn[8];
  k4_scales_bytes(b.scales, sc, mn);
  for (int g = 0; g < 8; ++g) {
    k.sc[g] = sc[g];
    k.mn[g] = mn[g];
  }
  k.d = half_at(&b.d);
  k.dmin = half_at(&b.dmin);
}

struct GQ4_K : KBase {
  static constexpr GgmlType kType = GgmlType::Q4_K;
  static constexpr int kMaxAbs = 15;  // largest |signed level|
  static constexpr int kOffset = 0, kMaxU = 15;
  static constexpr int kBytes = 144, kGroup = 32;
  static constexpr bool kMin = true;
  static void unpack_int(const uint8_t* p, KInts& k) { unpack_q45_k<false>(*reinterpret_cast<const BlockQ4_K*>(p), k); }
  static void unpack(const uint8_t* p, int8_t* lv, float* dsc, float* dmm) { unpack_k_float<GQ4_K>(p, lv, dsc, dmm); }
};
struct GQ5_K : KBase {
  static constexpr GgmlType kType = GgmlType::Q5_K;
  static constexpr int kMaxAbs = 31;  // largest |signed level|
  static constexpr int kOffset = 0, kMaxU = 31;
  static constexpr int kBytes = 176, kGroup = 32;
  static constexpr bool kMin = true;
  static void unpack_int(const uint8_t* p, KInts& k) { unpack_q45_k<true>(*reinterpret_cast<const BlockQ5_K*>(p), k); }
  static void unpack(const uint8_t* p, int8_t* lv, float* dsc, float* dmm) { unpack_k_float<GQ5_K>(p, lv, dsc, dmm); }
};
struct GQ6_K : KBase {
  static constexpr GgmlType kType = GgmlType::Q6_K;
  static constexpr int kMaxAbs = 32;  // largest |signed level|
  static constexpr int kOffset = 32, kMaxU = 63;
  static constexpr int kBytes = 210, kGroup = 16;
  static constexpr bool kMin = false;
  static void unpack_int(const uint8_t* p, KInts& k) {
    const auto& b = *reinterpret_cast<const BlockQ6_K*>(p);
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    const __m256i m45 = _mm256_set1_epi8(0x30);
    for (int h = 0; h < 2; ++h) {
      const __m256i a = load256(b.ql + 64 * h);
      const __m256i c = load256(b.ql + 64 * h + 32);
      const __m256i q = load256(b.qh + 32 * h);
      const __m256i e[4] = {_mm256_or_si256(_mm256_and_si256(a, m4), _mm256_and_si256(_mm256_slli_epi16(q, 4), m45)),
                            _mm256_or_si256(_mm256_and_si256(c, m4), _mm256_and_si256(_mm256_slli_epi16(q, 2), m45)),
                            _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(a, 4), m4), _mm256_and_si256(q, m45)),
                            _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(c, 4), m4),
                                            _mm256_and_si256(_mm256_srli_epi16(q, 2), m45))};
      for (int s = 0; s < 4; ++s) store256(k.u + 128 * h + 32 * s, e[s]);
    }
    for (int g = 0; g < 16; ++g) k.sc[g] = b.scales[g];
    k.d = half_at(&b.d);
  }
  static void unpack(const uint8_t* p, int8_t* lv, float* dsc, float* dmm) { unpack_k_float<GQ6_K>(p, lv, dsc, dmm); }
};
struct GQ3_K : KBase {
  static constexpr GgmlType kType = GgmlType::Q3_K;
  static constexpr int kMaxAbs = 4;  // largest |signed level|
  static constexpr int kOffset = 4, kMaxU = 7;
  static constexpr int kBytes = 110, kGroup = 16;
  static constexpr bool kMin = false;
  static void unpack_int(const uint8_t* p, KInts& k) {
    const auto& b = *reinterpret_cast<const BlockQ3_K*>(p);
    const __m256i m2 = _mm256_set1_epi8(3);
    const __m256i hm = load256(b.hmask);
    for (int h = 0; h < 2; ++h) {
      const __m256i q = load256(b.qs + 32 * h);
      for (int s = 0; s < 4; ++s) {
        const __m256i q2 = _mm256_and_si256(_mm256_srli_epi16(q, 2 * s), m2);
        store256(k.u + 128 * h + 32 * s, _mm256_or_si256(q2, unpack_bit_plane(hm, 4 * h + s, 2)));
      }
    }
    const uint32_t a = load_u32(b.scales), c4 = load_u32(b.scales + 4), c = load_u32(b.scales + 8);
    const uint32_t v[4] = {(a & 0x0f0f0f0fu) | ((c << 4) & 0x30303030u), (c4 & 0x0f0f0f0fu) | ((c << 2) & 0x30303030u),
                           ((a >> 4) & 0x0f0f0f0fu) | (c & 0x30303030u),
                           ((c4 >> 4) & 0x0f0f0f0fu) | ((c >> 2) & 0x30303030u)};
    uint8_t sc[16];
    std::memcpy(sc, v, 16);
    for (int g = 0; g < 16; ++g) k.sc[g] = static_cast<int16_t>(sc[g] - 32);
    k.d = half_at(&b.d);
  }
  static void unpack(const uint8_t* p, int8_t* lv, float* dsc, float* dmm) { unpack_k_float<GQ3_K>(p, lv, dsc, dmm); }
};
struct GQ2_K : KBase {
  static constexpr GgmlType kType = GgmlType::Q2_K;
  static constexpr int kMaxAbs = 3;  // largest |signed level|
  static constexpr int kOffset = 0, kMaxU = 3;
  static constexpr int kBytes = 84, kGroup = 16;
  static constexpr bool kMin = true;
  static void unpack_int(const uint8_t* p, KInts& k) {
    const auto& b = *reinterpret_cast<const BlockQ2_K*>(p);
    const __m256i m2 = _mm256_set1_epi8(3);
    for (int h = 0; h < 2; ++h) {
      const __m256i q = load256(b.qs + 32 * h);
      for (int s = 0; s < 4; ++s) store256(k.u + 128 * h + 32 * s, _mm256_and_si256(_mm256_srli_epi16(q, 2 * s), m2));
    }
    for (int g = 0; g < 16; ++g) {
      k.sc[g] = static_cast<int16_t>(b.scales[g] & 0xf);
      k.mn[g] = static_cast<int16_t>(b.scales[g] >> 4);
    }
    k.d = half_at(&b.d);
    k.dmin = half_at(&b.dmin);
  }
  static void unpack(const uint8_t* p, int8_t* lv, float* dsc, float* dmm) { unpack_k_float<GQ2_K>(p, lv, dsc, dmm); }
};
struct GIQ4_XS : KBase {
  static constexpr GgmlType kType = GgmlType::IQ4_XS;
  static constexpr int kMaxAbs = 127;  // largest |signed level|
  static constexpr int kBytes = 136, kGroup = 32;
  static constexpr bool kMin = false;
  static void unpack(const uint8_t* p, int8_t* lv, float* dsc, float*) {
    const auto& b = *reinterpret_cast<const BlockIQ4_XS*>(p);
    const __m256i table = unpack_iq4nl_table();
    for (int ib = 0; ib < 8; ++ib) store256(lv + 32 * ib, _mm256_shuffle_epi8(table, nibbles32(b.qs + 16 * ib)));
    const float d = half_at(&b.d);
    for (int ib = 0; ib < 8; ++ib) {
      const int low = (b.scales_l[ib / 2] >> (4 * (ib % 2))) & 0xf;
      const int high = (b.scales_h >> (2 * ib)) & 3;
      dsc[ib] = d * static_cast<float>((low | (high << 4)) - 32);
    }
  }
};
