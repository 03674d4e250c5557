// Scalar dequantizers and dot products for the non-linear 4-bit formats IQ4_NL and IQ4_XS.
// Their quantizers: quant_iq_quantize.cpp.
#include "tensor/fp16.h"
#include "tensor/quant_internal.h"

namespace tessera::quant {
namespace {

// Table value of element j (0..31) of a 16-byte nibble run: j in the low nibble of qs[j], j+16 in the high.
int iq4_value(const uint8_t* qs, int j) {
  const int nibble = j < 16 ? (qs[j] & 0xf) : (qs[j - 16] >> 4);
  return kIQ4NLValues[nibble];
}

}  // namespace

void dequantize_iq4_nl(const BlockIQ4_NL* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = fp16_to_fp32(x[i].d);
    for (int j = 0; j < kQK; ++j) y[j] = d * static_cast<float>(iq4_value(x[i].qs, j));
  }
}

void dequantize_iq4_xs(const BlockIQ4_XS* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQKK) {
    const float d = fp16_to_fp32(x[i].d);
    for (int ib = 0; ib < kQKK / 32; ++ib) {
      const float dl = d * static_cast<float>(iq4xs_scale(x[i], ib));
      const uint8_t* qs = x[i].qs + 16 * ib;
      for (int j = 0; j < 32; ++j) y[32 * ib + j] = dl * static_cast<float>(iq4_value(qs, j));
    }
  }
}

double dot_iq4_nl_q8_0(const BlockIQ4_NL* w, const BlockQ8_0* x, int64_t nb) {
  double sum = 0;
  for (int64_t i = 0; i < nb; ++i) {
    int sumi = 0;
    for (int j = 0; j < kQK; ++j) sumi += iq4_value(w[i].qs, j) * x[i].qs[j];
    sum += static_cast<double>(fp16_to_fp32(w[i].d)) * fp16_to_fp32(x[i].d) * sumi;
  }
  return sum;
}

double dot_iq4_xs_q8_k(const BlockIQ4_XS* w, const BlockQ8_K* x, int64_t nb) {
  double sum = 0;
  for (int64_t i = 0; i < nb; ++i) {
    int64_t scaled = 0;
    for (int ib = 0; ib < kQKK / 32; ++ib) {
      const uint8_t* qs = w[i].qs + 16 * ib;
      int sumi = 0;
      for (int j = 0; j < 32; ++j) sumi += iq4_value(qs, j) * x[i].qs[32 * ib + j];
      scaled += static_cast<int64_t>(iq4xs_scale(w[i], ib)) * sumi;
    }
    sum += static_cast<double>(x[i].d) * fp16_to_fp32(w[i].d) * static_cast<double>(scaled);
  }
  return sum;
}

}  // namespace tessera::quant
