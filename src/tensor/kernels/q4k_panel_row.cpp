// Unpacks a Q4_K block's nibbles and 6-bit scales into the order the panel packers copy from (q4k_panel_row.h).
#include "tensor/kernels/q4k_panel_row.h"

namespace tessera::kernels {

Q4KPanelRow q4k_panel_row(const quant::BlockQ4_K& b) {
  // The block stores element 64j + l in the low nibble of qs[32j + l] and 64j + 32 + l in its high nibble.
  uint8_t lv[quant::kQKK];
  for (int j = 0; j < 4; ++j) {
    for (int l = 0; l < 32; ++l) {
      lv[64 * j + l] = b.qs[32 * j + l] & 0x0f;
      lv[64 * j + 32 + l] = b.qs[32 * j + l] >> 4;
    }
  }
  Q4KPanelRow row{};
  for (int g = 0; g < 8; ++g) {
    for (int k = 0; k < 16; ++k) {
      row.qs[16 * g + k] = static_cast<uint8_t>(lv[32 * g + k] | lv[32 * g + 16 + k] << 4);
    }
    quant::get_scale_min_k4(g, b.scales, row.scales[g], row.mins[g]);
  }
  return row;
}

}  // namespace tessera::kernels
