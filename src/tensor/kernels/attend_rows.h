// What the attention block updates of every path share (attention_tile.h): which keys of a block a row sees.
#pragma once

#include <cstdint>
#include <limits>

#include "tensor/attention_tile.h"

namespace tessera::kernels {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// The keys of the block row r sees.
[[gnu::always_inline]] inline int64_t keys_seen(const AttnRows& t, const AttnKeys& kv, int64_t r) {
  const int64_t n = int64_t{t.pos[r]} - kv.p0 + 1;
  return kv.n < n ? kv.n : n;
}

// The keys of the block that any row sees: the ones the vector kernels transpose.
// A plain loop, not std::max_element: each ISA's file inlines this, and no out-of-line template instance compiled
// with one path's flags can stand in for another's.
[[gnu::always_inline]] inline int64_t keys_seen_by_any(const AttnRows& t, const AttnKeys& kv) {
  int32_t last = t.pos[0];
  for (int64_t r = 1; r < t.n_rows; ++r) last = t.pos[r] > last ? t.pos[r] : last;
  const int64_t n = int64_t{last} - kv.p0 + 1;
  return kv.n < n ? kv.n : n;
}

}  // namespace tessera::kernels
