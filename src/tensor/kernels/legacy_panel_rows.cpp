// Gathers a Q5_0/Q5_1 block's fifth bits into the order their panels keep (legacy_panel_rows.h).
#include "tensor/kernels/legacy_panel_rows.h"

#include <cstring>

namespace tessera::kernels {

uint8_t legacy_fifth_bits(const uint8_t* qh, int i) {
  uint32_t bits;
  std::memcpy(&bits, qh, 4);
  int v = 0;
  for (int c = 0; c < 4; ++c) {
    v |= static_cast<int>((bits >> (4 * c + i)) & 1) << c | static_cast<int>((bits >> (16 + 4 * c + i)) & 1) << (4 + c);
  }
  return static_cast<uint8_t>(v);
}

}  // namespace tessera::kernels
