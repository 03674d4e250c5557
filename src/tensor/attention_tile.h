// Attention on tiles of query rows with an online softmax (as flash attention computes it): one call folds a block
// of keys into each row's running max, sum and unnormalised output, so no row ever holds all its scores.
#pragma once

#include <cstdint>

namespace tessera {

constexpr int kAttnLanes = 16;     // query rows per tile: one AVX-512 register holds a value of each
constexpr int64_t kAttnKeys = 64;  // keys per block at most

// A tile's state; every array is kAttnLanes wide per element, row (lane) innermost, 64-byte aligned.
struct AttnTile {
  const float* qt;     // [d][lanes] the queries, already multiplied by the attention scale
  float* ot;           // [dv][lanes] the running output, not yet divided by l
  float* m;            // [lanes] running max of the scores (-inf before the first key)
  float* l;            // [lanes] running sum of e^(score - m)
  const int32_t* pos;  // [lanes] the last key position each row sees (causal); -1 for a lane without a row
};

// A block of consecutive keys, as f32 rows.
struct AttnKeys {
  const float* k;  // [n][d]
  const float* v;  // [n][dv]
  int64_t n = 0;   // 1..kAttnKeys
  int64_t p0 = 0;  // position of key 0
  int64_t d = 0;
  int64_t dv = 0;
};

// Folds keys p0 .. p0 + n - 1 into the rows that see them. Each row's arithmetic depends only on its own query and
// keys, in the same order whichever rows share its tile, so results do not change with how a batch is tiled.
using AttnUpdateFn = void (*)(const AttnTile& tile, const AttnKeys& keys);

void attend_scalar(const AttnTile& tile, const AttnKeys& keys);
void attend_avx2(const AttnTile& tile, const AttnKeys& keys);  // AVX2 + FMA
void attend_avx512(const AttnTile& tile, const AttnKeys& keys);

}  // namespace tessera
