// Unpacks Q2_K, Q3_K and Q6_K row blocks into the order their panel packers interleave (k16_panel_rows.h).
#include "tensor/kernels/k16_panel_rows.h"

#include "tensor/quant_blocks.h"
#include "tensor/quant_internal.h"

namespace tessera::kernels {

void k16_row(K16Format f, const void* block, uint8_t* levels, uint8_t* scales) {
  switch (f) {
    case K16Format::Q6_K: {
      const auto& b = *static_cast<const quant::BlockQ6_K*>(block);
      int8_t lv[quant::kQKK];
      quant::q6k_levels(b, lv);
      for (int e = 0; e < quant::kQKK; ++e) levels[e] = static_cast<uint8_t>(lv[e] + k16_offset(f));
      for (int j = 0; j < 16; ++j) scales[j] = static_cast<uint8_t>(b.scales[j]);
      return;
    }
    case K16Format::Q3_K: {
      const auto& b = *static_cast<const quant::BlockQ3_K*>(block);
      for (int e = 0; e < quant::kQKK; ++e) levels[e] = static_cast<uint8_t>(quant::q3k_level(b, e) + k16_offset(f));
      for (int j = 0; j < 16; ++j) scales[j] = static_cast<uint8_t>(quant::q3k_scale(b.scales, j));
      return;
    }
    case K16Format::Q2_K: {
      const auto& b = *static_cast<const quant::BlockQ2_K*>(block);
      for (int e = 0; e < quant::kQKK; ++e) levels[e] = static_cast<uint8_t>(quant::q2k_level(b, e));
      for (int j = 0; j < 16; ++j) scales[j] = b.scales[j];
      return;
    }
  }
}

void k16_place(K16Format f, const uint8_t* u, int r, size_t vec_bytes, uint8_t* unit) {
  const size_t v1 = vec_bytes, v2 = 2 * vec_bytes;
  for (int i = 0; i < 4; ++i) {
    const size_t at = static_cast<size_t>(4 * r + i);
    switch (f) {
      case K16Format::Q6_K:
        for (int k = 0; k < 3; ++k) {
          unit[vec_bytes * static_cast<size_t>(k) + at] =
              static_cast<uint8_t>(u[4 * k + i] | (u[12 + i] >> 2 * k & 3) << 6);
        }
        break;
      case K16Format::Q3_K: {
        const auto a = [&](int c) { return u[4 * c + i]; };
        const auto b = [&](int c) { return u[16 + 4 * c + i]; };
        unit[at] = static_cast<uint8_t>(a(0) | a(1) << 3 | (b(2) & 3) << 6);
        unit[v1 + at] = static_cast<uint8_t>(a(2) | a(3) << 3 | (b(2) >> 2 & 1) << 6 | (b(3) & 1) << 7);
        unit[v2 + at] = static_cast<uint8_t>(b(0) | b(1) << 3 | (b(3) >> 1 & 3) << 6);
        break;
      }
      case K16Format::Q2_K:
        unit[at] = static_cast<uint8_t>(u[i] | u[4 + i] << 2 | u[8 + i] << 4 | u[12 + i] << 6);
        break;
    }
  }
}

}  // namespace tessera::kernels
