// Unpacks a Q4_K block's nibbles and 6-bit scales into the order the panel packers copy from (q4k_panel_row.h).
#include "tensor/kernels/q4k_panel_row.h"

namespace tessera::kernels {

namespace {

Q4KPanelRow panel_row(const uint8_t* qs, const uint8_t* scales) {
  // The block stores element 64j + l in the low nibble of qs[32j + l] and 64j + 32 + l in its high nibble.
  uint8_t lv[quant::kQKK];
  for (int j = 0; j < 4; ++j) {
    for (int l = 0; l < 32; ++l) {
      lv[64 * j + l] = qs[32 * j + l] & 0x0f;
      lv[64 * j + 32 + l] = qs[32 * j + l] >> 4;
    }
  }
  Q4KPanelRow row{};
  for (int g = 0; g < 8; ++g) {
    for (int k = 0; k < 16; ++k) {
      row.qs[16 * g + k] = static_cast<uint8_t>(lv[32 * g + k] | lv[32 * g + 16 + k] << 4);
    }
    quant::get_scale_min_k4(g, scales, row.scales[g], row.mins[g]);
  }
  return row;
}

}  // namespace

Q4KPanelRow q4k_panel_row(const quant::BlockQ4_K& b) { return panel_row(b.qs, b.scales); }

Q4KPanelRow q4k_panel_row(const quant::BlockQ5_K& b) {
  Q4KPanelRow row = panel_row(b.qs, b.scales);
  // Element e's fifth bit is bit e / 32 of qh[e % 32].
  const auto bit = [&](int e) { return (b.qh[e % 32] >> (e / 32)) & 1; };
  for (int g = 0; g < 8; ++g) {
    for (int i = 0; i < 4; ++i) {
      int byte = 0;
      for (int c = 0; c < 4; ++c) byte |= bit(32 * g + 4 * c + i) << c | bit(32 * g + 16 + 4 * c + i) << (4 + c);
      row.high[4 * g + i] = static_cast<uint8_t>(byte);
    }
  }
  return row;
}

}  // namespace tessera::kernels
