// One row block of a K-quant with a scale per 16 elements (Q2_K, Q3_K, Q6_K) as the panel layouts of the SIMD paths
// interleave it (x86/avx2/panels_k16.cpp, x86/avx512/panels_k16.cpp). Compiled for the baseline: the
// packers run once at load, not in the hot loop.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tessera::kernels {

enum class K16Format { Q2_K, Q3_K, Q6_K };

// The levels each format stores unsigned: level + offset (Q3_K 4, Q6_K 32; Q2_K's are unsigned already).
constexpr int k16_offset(K16Format f) { return f == K16Format::Q6_K ? 32 : f == K16Format::Q3_K ? 4 : 0; }
// Groups of 16 elements per unit of levels: Q3_K's 3-bit levels pack two groups into 3 vectors.
constexpr int k16_groups_per_unit(K16Format f) { return f == K16Format::Q3_K ? 2 : 1; }

// A SIMD path's format description starts from this: the format and its constants.
template <K16Format F>
struct K16Base {
  static constexpr K16Format kFormat = F;
  static constexpr int kOffset = k16_offset(F);
  static constexpr int kGroupsPerUnit = k16_groups_per_unit(F);
  static constexpr int kVectors = F == K16Format::Q2_K ? 1 : 3;  // per unit
  static constexpr bool kMins = F == K16Format::Q2_K;            // Q2_K: a min per group, subtracted
};

// A row block's 256 levels + offset, in element order, and its 16 scale bytes: signed for Q3_K and Q6_K, Q2_K's
// scale | min << 4 as in its rows.
void k16_row(K16Format f, const void* block, uint8_t* levels, uint8_t* scales);

// Row r's bytes of one unit (k16_groups_per_unit groups) from that unit's levels u, in vectors of vec_bytes (byte
// 4r + i of a vector belongs to row r):
// - Q6_K, one group in 3 vectors: vector k holds element 4k + i's 6 bits low and bits 2k, 2k + 1 of element
//   12 + i's on top;
// - Q3_K, groups A and B (elements 0-15, 16-31) in 3 vectors: vector 0 holds A0 in bits 0-2, A1 in 3-5 and bits
//   0-1 of B2 in 6-7; vector 1 A2, A3, bit 2 of B2 and bit 0 of B3; vector 2 B0, B1 and bits 1-2 of B3 (Xc: the
//   level of element 4c + i of group X);
// - Q2_K, one group in 1 vector: element 4c + i's 2 bits at bits 2c, 2c + 1.
void k16_place(K16Format f, const uint8_t* u, int r, size_t vec_bytes, uint8_t* unit);

}  // namespace tessera::kernels
