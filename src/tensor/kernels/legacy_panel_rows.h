// The fifth bits of a Q5_0/Q5_1 row block as the panel layouts of the SIMD paths store them
// (x86/avx2/panels_legacy.cpp, x86/avx512/panels_legacy.cpp). Compiled for the baseline: packers run at load.
#pragma once

#include <cstdint>

namespace tessera::kernels {

// Byte i (0..3) of a row's fifth-bit plane: bit c for element 4c + i, bit 4 + c for element 16 + 4c + i, from the
// block's qh (bit j: element j's fifth bit, little-endian).
uint8_t legacy_fifth_bits(const uint8_t* qh, int i);

}  // namespace tessera::kernels
