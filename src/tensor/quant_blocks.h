// Byte layouts of the ggml quant blocks and small helpers shared by the scalar reference codecs.
// Internal to src/tensor: the layouts must match GGUF files byte for byte, hence the static_asserts.
#pragma once

#include <bit>
#include <cstdint>

namespace tessera::quant {

inline constexpr int kQK = 32;    // elements per legacy block (Q4_0 ... Q8_1, IQ4_NL)
inline constexpr int kQKK = 256;  // elements per K-quant super-block (Q2_K ... Q8_K, IQ4_XS)

// fp16 fields are kept as raw uint16_t bits; fp16.h converts them.
struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[kQK / 2];  // element j in the low nibble of qs[j], element j+16 in the high nibble
};
struct BlockQ4_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qs[kQK / 2];
};
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];  // bit j = fifth bit of element j (little-endian uint32)
  uint8_t qs[kQK / 2];
};
struct BlockQ5_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qh[4];
  uint8_t qs[kQK / 2];
};
struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[kQK];
};
struct BlockQ8_1 {
  uint16_t d;
  uint16_t s;  // fp16(d * sum(qs)): lets Q4_1/Q5_1 dots apply their minimum without touching qs
  int8_t qs[kQK];
};
struct BlockQ2_K {
  uint8_t scales[kQKK / 16];  // low nibble: scale, high nibble: min, per 16 elements
  uint8_t qs[kQKK / 4];
  uint16_t d;
  uint16_t dmin;
};
struct BlockQ3_K {
  uint8_t hmask[kQKK / 8];  // bit e/32 of hmask[e%32] = third bit of element e
  uint8_t qs[kQKK / 4];
  uint8_t scales[12];  // 16 signed 6-bit scales (offset 32)
  uint16_t d;
};
struct BlockQ4_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];  // 8 scales and 8 mins, 6 bits each
  uint8_t qs[kQKK / 2];
};
struct BlockQ5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qh[kQKK / 8];
  uint8_t qs[kQKK / 2];
};
struct BlockQ6_K {
  uint8_t ql[kQKK / 2];
  uint8_t qh[kQKK / 4];
  int8_t scales[kQKK / 16];
  uint16_t d;
};
struct BlockQ8_K {
  float d;  // f32, not f16: Q8_K only lives in memory as an activation format
  int8_t qs[kQKK];
  int16_t bsums[kQKK / 16];
};
struct BlockIQ4_NL {
  uint16_t d;
  uint8_t qs[kQK / 2];
};
struct BlockIQ4_XS {
  uint16_t d;
  uint16_t scales_h;  // high 2 bits of the eight 6-bit scales
  uint8_t scales_l[kQKK / 64];
  uint8_t qs[kQKK / 2];
};

static_assert(sizeof(BlockQ4_0) == 18);
static_assert(sizeof(BlockQ4_1) == 20);
static_assert(sizeof(BlockQ5_0) == 22);
static_assert(sizeof(BlockQ5_1) == 24);
static_assert(sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ8_1) == 36);
static_assert(sizeof(BlockQ2_K) == 84);
static_assert(sizeof(BlockQ3_K) == 110);
static_assert(sizeof(BlockQ4_K) == 144);
static_assert(sizeof(BlockQ5_K) == 176);
static_assert(sizeof(BlockQ6_K) == 210);
static_assert(sizeof(BlockQ8_K) == 292);
static_assert(sizeof(BlockIQ4_NL) == 18);
static_assert(sizeof(BlockIQ4_XS) == 136);

// The 16 non-uniform levels shared by IQ4_NL and IQ4_XS.
inline constexpr int8_t kIQ4NLValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

// Round to nearest, ties to even, for |v| < 2^22: adding 1.5 * 2^23 leaves the rounded integer in the
// low mantissa bits. ggml rounds this way in its K-quant code, so byte-exact output depends on it.
inline int nearest_int(float v) {
  const float biased = v + 12582912.0f;
  return static_cast<int>(std::bit_cast<uint32_t>(biased) & 0x7fffffu) - 0x400000;
}

// The 6-bit scale and min of sub-block j (0..7) in a Q4_K/Q5_K scales[12] array: j < 4 keep both in the
// low 6 bits of bytes j and j+4; j >= 4 split them into a nibble of byte j+4 plus the top 2 bits of bytes j-4 / j.
inline void get_scale_min_k4(int j, const uint8_t* q, uint8_t& scale, uint8_t& min) {
  if (j < 4) {
    scale = q[j] & 63;
    min = q[j + 4] & 63;
  } else {
    scale = static_cast<uint8_t>((q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4));
    min = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

// The signed scale (-32..31) of 16-element group j (0..15) in a Q3_K scales[12] array: low nibbles in
// bytes 0..7 (j < 8 low half, j >= 8 high half of byte j-8), 2 high bits in byte 8 + j%4 at bit 2*(j/4).
inline int q3k_scale(const uint8_t* scales, int j) {
  const int low = j < 8 ? (scales[j] & 0xf) : (scales[j - 8] >> 4);
  const int high = (scales[8 + j % 4] >> (2 * (j / 4))) & 3;
  return (low | (high << 4)) - 32;
}

// The 6-bit scale (offset 32) of 32-element group ib (0..7) in an IQ4_XS block.
inline int iq4xs_scale(const BlockIQ4_XS& b, int ib) {
  const int low = (b.scales_l[ib / 2] >> (4 * (ib % 2))) & 0xf;
  const int high = (b.scales_h >> (2 * ib)) & 3;
  return (low | (high << 4)) - 32;
}

}  // namespace tessera::quant
