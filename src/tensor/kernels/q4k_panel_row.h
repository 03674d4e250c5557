// One Q4_K row block as the panel layouts of the SIMD paths interleave it (x86/avx2/panels_q4k.cpp,
// x86/avx512/panels_q4k.cpp). Compiled for the baseline: the packers run once at load, not in the hot loop.
#pragma once

#include <cstdint>

#include "tensor/quant_blocks.h"

namespace tessera::kernels {

struct Q4KPanelRow {
  // Byte 16g + 4c + i: element 32g + 4c + i in the low nibble, 32g + 16 + 4c + i in the high one (g < 8, c < 4).
  uint8_t qs[128];
  uint8_t scales[8];  // group g's 6-bit scale
  uint8_t mins[8];    // group g's 6-bit min
  // Q5_K only: byte 4g + i has bit c set when element 32g + 4c + i's level has its fifth bit, bit 4 + c for element
  // 32g + 16 + 4c + i.
  uint8_t high[32];
};

Q4KPanelRow q4k_panel_row(const quant::BlockQ4_K& b);
Q4KPanelRow q4k_panel_row(const quant::BlockQ5_K& b);  // the same scales and nibbles, plus `high`

}  // namespace tessera::kernels
