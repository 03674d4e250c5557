// Attention over blocks of keys with an online softmax (as flash attention computes it): one call folds a block of
// keys into each query row's running max, sum and unnormalised output, so no row ever holds all its scores.
#pragma once

#include <cstdint>

namespace tessera {

constexpr int64_t kAttnKeys = 64;  // keys per block at most

// The rows of some queries (the heads of one KV group, for one token or several), each with its running state.
struct AttnRows {
  const float* q;      // [n_rows][d] the queries, already multiplied by the attention scale
  float* o;            // [n_rows][dv] the running outputs, not yet divided by l
  float* m;            // [n_rows] running max of the scores (-inf before the first key)
  float* l;            // [n_rows] running sum of e^(score - m)
  const int32_t* pos;  // [n_rows] the last key position each row sees (causal)
  int64_t n_rows = 0;
};

// A block of consecutive keys, as f32 rows.
struct AttnKeys {
  const float* k;  // [n][d]
  const float* v;  // [n][dv]
  int64_t n = 0;   // 1..kAttnKeys
  int64_t p0 = 0;  // position of key 0
  int64_t d = 0;
  int64_t dv = 0;
  float* kt = nullptr;  // room for the keys transposed, [d][kAttnKeys], 64-byte aligned (AVX-512 kernel)
};

// Folds keys p0 .. p0 + n - 1 into the rows that see them. A row's arithmetic depends only on its own query and
// keys, so its result does not change with the rows around it (a decode step's token gets the bits it would get
// inside a prompt), and the vectors run along the keys and the value's elements, not the rows, so a decode step's
// few rows fill whole vectors as a prompt's many do.
using AttnUpdateFn = void (*)(const AttnRows& rows, const AttnKeys& keys);

void attend_scalar(const AttnRows& rows, const AttnKeys& keys);

}  // namespace tessera
