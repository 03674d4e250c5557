// The block update of attention_tile.h: the scalar reference, row by row. The AVX2 / AVX-512 versions
// (kernels/x86/<isa>/attention.cpp) work along the keys and are reached through the kernels' table (VecOps).
#include "tensor/attention_tile.h"

#include <cmath>

#include "tensor/kernels/attend_rows.h"

namespace tessera {

using kernels::keys_seen;
using kernels::kNegInf;

void attend_scalar(const AttnRows& t, const AttnKeys& kv) {
  float s[kAttnKeys];
  for (int64_t r = 0; r < t.n_rows; ++r) {
    const int64_t n = keys_seen(t, kv, r);
    if (n <= 0) continue;
    const float* q = t.q + r * kv.d;
    float mx = kNegInf;
    for (int64_t p = 0; p < n; ++p) {
      float acc = 0.0f;
      for (int64_t i = 0; i < kv.d; ++i) acc += q[i] * kv.k[p * kv.d + i];
      s[p] = acc;
      mx = std::fmax(mx, acc);
    }
    const float m_new = std::fmax(t.m[r], mx);
    const float corr = t.m[r] == kNegInf ? 0.0f : std::exp(t.m[r] - m_new);
    t.m[r] = m_new;
    float* o = t.o + r * kv.dv;
    for (int64_t i = 0; i < kv.dv; ++i) o[i] *= corr;
    float l = 0.0f;
    for (int64_t p = 0; p < n; ++p) {
      const float e = std::exp(s[p] - m_new);
      l += e;
      for (int64_t i = 0; i < kv.dv; ++i) o[i] += e * kv.v[p * kv.dv + i];
    }
    t.l[r] = t.l[r] * corr + l;
  }
}

}  // namespace tessera
