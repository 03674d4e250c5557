// quant.h's entry points: check the row length, then dispatch by tensor type to the per-format codecs.
#include "tensor/quant.h"

#include <cstring>
#include <string>

#include "tensor/quant_internal.h"
#include "util/error.h"

namespace tessera {
namespace {

using namespace quant;

// "q4_K", or "id 99" for an enum value outside the type table (e.g. read from a corrupt file).
std::string describe(GgmlType type) {
  const auto traits = find_type_traits(static_cast<uint32_t>(type));
  if (traits) return std::string(traits->name);
  return fmt::format("id {}", static_cast<uint32_t>(type));
}

[[noreturn]] void unsupported(const char* what, GgmlType type) {
  fail("{}: tensor type {} is not supported", what, describe(type));
}

// Number of blocks in a row of n elements; throws for an unknown type or a partial block.
int64_t block_count(const char* what, GgmlType type, int64_t n) {
  const auto traits = find_type_traits(static_cast<uint32_t>(type));
  if (!traits) unsupported(what, type);
  if (n < 0 || n % traits->block_size != 0) {
    fail("{}: a row of {} elements is not a whole number of {} blocks ({} elements each)", what, n, traits->name,
         traits->block_size);
  }
  return n / traits->block_size;
}

template <typename Block>
const Block* as(const void* p) {
  return static_cast<const Block*>(p);
}

template <typename Block>
Block* as(void* p) {
  return static_cast<Block*>(p);
}

}  // namespace

void dequantize_row(GgmlType type, const void* src, float* dst, int64_t n) {
  constexpr const char* kWhat = "dequantize_row";
  const int64_t nb = block_count(kWhat, type, n);
  switch (type) {
    case GgmlType::F32:
      if (n > 0) std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case GgmlType::F16:
      return dequantize_f16(as<uint16_t>(src), dst, n);
    case GgmlType::BF16:
      return dequantize_bf16(as<uint16_t>(src), dst, n);
    case GgmlType::Q4_0:
      return dequantize_q4_0(as<BlockQ4_0>(src), dst, nb);
    case GgmlType::Q4_1:
      return dequantize_q4_1(as<BlockQ4_1>(src), dst, nb);
    case GgmlType::Q5_0:
      return dequantize_q5_0(as<BlockQ5_0>(src), dst, nb);
    case GgmlType::Q5_1:
      return dequantize_q5_1(as<BlockQ5_1>(src), dst, nb);
    case GgmlType::Q8_0:
      return dequantize_q8_0(as<BlockQ8_0>(src), dst, nb);
    case GgmlType::Q8_1:
      return dequantize_q8_1(as<BlockQ8_1>(src), dst, nb);
    case GgmlType::Q2_K:
      return dequantize_q2_k(as<BlockQ2_K>(src), dst, nb);
    case GgmlType::Q3_K:
      return dequantize_q3_k(as<BlockQ3_K>(src), dst, nb);
    case GgmlType::Q4_K:
      return dequantize_q4_k(as<BlockQ4_K>(src), dst, nb);
    case GgmlType::Q5_K:
      return dequantize_q5_k(as<BlockQ5_K>(src), dst, nb);
    case GgmlType::Q6_K:
      return dequantize_q6_k(as<BlockQ6_K>(src), dst, nb);
    case GgmlType::Q8_K:
      return dequantize_q8_k(as<BlockQ8_K>(src), dst, nb);
    case GgmlType::IQ4_NL:
      return dequantize_iq4_nl(as<BlockIQ4_NL>(src), dst, nb);
    case GgmlType::IQ4_XS:
      return dequantize_iq4_xs(as<BlockIQ4_XS>(src), dst, nb);
    default:
      unsupported(kWhat, type);
  }
}

bool can_quantize(GgmlType type) {
  switch (type) {
    case GgmlType::F32:
    case GgmlType::F16:
    case GgmlType::BF16:
    case GgmlType::Q4_0:
    case GgmlType::Q4_1:
    case GgmlType::Q5_0:
    case GgmlType::Q5_1:
    case GgmlType::Q8_0:
    case GgmlType::Q8_1:
    case GgmlType::Q2_K:
    case GgmlType::Q3_K:
    case GgmlType::Q4_K:
    case GgmlType::Q5_K:
    case GgmlType::Q6_K:
    case GgmlType::Q8_K:
    case GgmlType::IQ4_NL:
    case GgmlType::IQ4_XS:
      return true;
    default:
      return false;
  }
}

void quantize_row(GgmlType type, const float* src, void* dst, int64_t n) {
  constexpr const char* kWhat = "quantize_row";
  if (!can_quantize(type)) unsupported(kWhat, type);
  const int64_t nb = block_count(kWhat, type, n);
  switch (type) {
    case GgmlType::F32:
      if (n > 0) std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case GgmlType::F16:
      return quantize_f16(src, as<uint16_t>(dst), n);
    case GgmlType::BF16:
      return quantize_bf16(src, as<uint16_t>(dst), n);
    case GgmlType::Q4_0:
      return quantize_q4_0(src, as<BlockQ4_0>(dst), nb);
    case GgmlType::Q4_1:
      return quantize_q4_1(src, as<BlockQ4_1>(dst), nb);
    case GgmlType::Q5_0:
      return quantize_q5_0(src, as<BlockQ5_0>(dst), nb);
    case GgmlType::Q5_1:
      return quantize_q5_1(src, as<BlockQ5_1>(dst), nb);
    case GgmlType::Q8_0:
      return quantize_q8_0(src, as<BlockQ8_0>(dst), nb);
    case GgmlType::Q8_1:
      return quantize_q8_1(src, as<BlockQ8_1>(dst), nb);
    case GgmlType::Q2_K:
      return quantize_q2_k(src, as<BlockQ2_K>(dst), nb);
    case GgmlType::Q3_K:
      return quantize_q3_k(src, as<BlockQ3_K>(dst), nb);
    case GgmlType::Q4_K:
      return quantize_q4_k(src, as<BlockQ4_K>(dst), nb);
    case GgmlType::Q5_K:
      return quantize_q5_k(src, as<BlockQ5_K>(dst), nb);
    case GgmlType::Q6_K:
      return quantize_q6_k(src, as<BlockQ6_K>(dst), nb);
    case GgmlType::Q8_K:
      return quantize_q8_k(src, as<BlockQ8_K>(dst), nb);
    case GgmlType::IQ4_NL:
      return quantize_iq4_nl(src, as<BlockIQ4_NL>(dst), nb);
    case GgmlType::IQ4_XS:
      return quantize_iq4_xs(src, as<BlockIQ4_XS>(dst), nb);
    default:
      unsupported(kWhat, type);
  }
}

GgmlType vec_dot_type(GgmlType weight_type) {
  switch (weight_type) {
    case GgmlType::F32:
    case GgmlType::F16:
    case GgmlType::BF16:
    case GgmlType::Q8_1:
    case GgmlType::Q8_K:
      return weight_type;
    case GgmlType::Q4_0:
    case GgmlType::Q5_0:
    case GgmlType::Q8_0:
    case GgmlType::IQ4_NL:
      return GgmlType::Q8_0;
    case GgmlType::Q4_1:
    case GgmlType::Q5_1:
      return GgmlType::Q8_1;
    case GgmlType::Q2_K:
    case GgmlType::Q3_K:
    case GgmlType::Q4_K:
    case GgmlType::Q5_K:
    case GgmlType::Q6_K:
    case GgmlType::IQ4_XS:
      return GgmlType::Q8_K;
    default:
      unsupported("vec_dot_type", weight_type);
  }
}

void quantize_row_activation(GgmlType act_type, const float* src, void* dst, int64_t n) {
  constexpr const char* kWhat = "quantize_row_activation";
  const int64_t nb = block_count(kWhat, act_type, n);
  switch (act_type) {
    case GgmlType::F32:
    case GgmlType::F16:
    case GgmlType::BF16:
      return quantize_row(act_type, src, dst, n);  // float activations convert as weights do
    case GgmlType::Q8_0:
      return quantize_q8_0_activation(src, as<BlockQ8_0>(dst), nb);
    case GgmlType::Q8_1:
      return quantize_q8_1_activation(src, as<BlockQ8_1>(dst), nb);
    case GgmlType::Q8_K:
      return quantize_q8_k(src, as<BlockQ8_K>(dst), nb);
    default:
      unsupported(kWhat, act_type);
  }
}

float vec_dot_row(GgmlType weight_type, const void* weight_row, const void* act_row, int64_t n) {
  constexpr const char* kWhat = "vec_dot_row";
  const GgmlType act_type = vec_dot_type(weight_type);
  const int64_t nb = block_count(kWhat, weight_type, n);
  block_count(kWhat, act_type, n);  // Q8_K activations need whole 256-element blocks too
  const void* w = weight_row;
  const void* x = act_row;
  double dot = 0;
  switch (weight_type) {
    case GgmlType::F32:
      dot = dot_f32(as<float>(w), as<float>(x), n);
      break;
    case GgmlType::F16:
      dot = dot_f16(as<uint16_t>(w), as<uint16_t>(x), n);
      break;
    case GgmlType::BF16:
      dot = dot_bf16(as<uint16_t>(w), as<uint16_t>(x), n);
      break;
    case GgmlType::Q4_0:
      dot = dot_q4_0_q8_0(as<BlockQ4_0>(w), as<BlockQ8_0>(x), nb);
      break;
    case GgmlType::Q4_1:
      dot = dot_q4_1_q8_1(as<BlockQ4_1>(w), as<BlockQ8_1>(x), nb);
      break;
    case GgmlType::Q5_0:
      dot = dot_q5_0_q8_0(as<BlockQ5_0>(w), as<BlockQ8_0>(x), nb);
      break;
    case GgmlType::Q5_1:
      dot = dot_q5_1_q8_1(as<BlockQ5_1>(w), as<BlockQ8_1>(x), nb);
      break;
    case GgmlType::Q8_0:
      dot = dot_q8_0_q8_0(as<BlockQ8_0>(w), as<BlockQ8_0>(x), nb);
      break;
    case GgmlType::Q8_1:
      dot = dot_q8_1_q8_1(as<BlockQ8_1>(w), as<BlockQ8_1>(x), nb);
      break;
    case GgmlType::Q2_K:
      dot = dot_q2_k_q8_k(as<BlockQ2_K>(w), as<BlockQ8_K>(x), nb);
      break;
    case GgmlType::Q3_K:
      dot = dot_q3_k_q8_k(as<BlockQ3_K>(w), as<BlockQ8_K>(x), nb);
      break;
    case GgmlType::Q4_K:
      dot = dot_q4_k_q8_k(as<BlockQ4_K>(w), as<BlockQ8_K>(x), nb);
      break;
    case GgmlType::Q5_K:
      dot = dot_q5_k_q8_k(as<BlockQ5_K>(w), as<BlockQ8_K>(x), nb);
      break;
    case GgmlType::Q6_K:
      dot = dot_q6_k_q8_k(as<BlockQ6_K>(w), as<BlockQ8_K>(x), nb);
      break;
    case GgmlType::Q8_K:
      dot = dot_q8_k_q8_k(as<BlockQ8_K>(w), as<BlockQ8_K>(x), nb);
      break;
    case GgmlType::IQ4_NL:
      dot = dot_iq4_nl_q8_0(as<BlockIQ4_NL>(w), as<BlockQ8_0>(x), nb);
      break;
    case GgmlType::IQ4_XS:
      dot = dot_iq4_xs_q8_k(as<BlockIQ4_XS>(w), as<BlockQ8_K>(x), nb);
      break;
    default:
      unsupported(kWhat, weight_type);
  }
  return static_cast<float>(dot);
}

}  // namespace tessera
