// The mix rules follow llama-quantize's choices in spirit (output head and sensitive layers get more bits), so
// synthetic files have realistic sizes and type layouts for benchmarks.
#include "model/quant_mix.h"

#include <array>
#include <cctype>

#include "util/error.h"

namespace tessera {
namespace {

constexpr std::array kMixes = {
    QuantMix{"f32", GgmlType::F32, 0},        QuantMix{"f16", GgmlType::F16, 1},
    QuantMix{"bf16", GgmlType::BF16, 32},     QuantMix{"q8_0", GgmlType::Q8_0, 7},
    QuantMix{"q4_0", GgmlType::Q4_0, 2},      QuantMix{"q4_1", GgmlType::Q4_1, 3},
    QuantMix{"q5_0", GgmlType::Q5_0, 8},      QuantMix{"q5_1", GgmlType::Q5_1, 9},
    QuantMix{"q2_k", GgmlType::Q2_K, 10},     QuantMix{"q3_k_s", GgmlType::Q3_K, 11},
    QuantMix{"q3_k_m", GgmlType::Q3_K, 12},   QuantMix{"q4_k_s", GgmlType::Q4_K, 14},
    QuantMix{"q4_k_m", GgmlType::Q4_K, 15},   QuantMix{"q5_k_s", GgmlType::Q5_K, 16},
    QuantMix{"q5_k_m", GgmlType::Q5_K, 17},   QuantMix{"q6_k", GgmlType::Q6_K, 18},
    QuantMix{"iq4_nl", GgmlType::IQ4_NL, 25}, QuantMix{"iq4_xs", GgmlType::IQ4_XS, 30},
};

// llama-quantize's "use more bits" layers: the first and last eighth, and every third layer in between.
bool use_more_bits(int64_t layer, int64_t n_layer) {
  return layer < n_layer / 8 || layer >= 7 * n_layer / 8 || (layer - n_layer / 8) % 3 == 2;
}

// A type whose block fits rows of n elements, trading up in bits as llama-quantize does.
GgmlType fit_row(GgmlType type, int64_t n) {
  for (int guard = 0; guard < 4; ++guard) {
    if (n % type_traits(type).block_size == 0) return type;
    switch (type) {
      case GgmlType::Q2_K:
      case GgmlType::Q3_K:
      case GgmlType::Q4_K:
        type = GgmlType::Q5_0;
        break;
      case GgmlType::Q5_K:
        type = GgmlType::Q5_1;
        break;
      case GgmlType::Q6_K:
        type = GgmlType::Q8_0;
        break;
      case GgmlType::IQ4_XS:
        type = GgmlType::IQ4_NL;
        break;
      default:
        type = GgmlType::F16;
        break;
    }
  }
  return type;
}

}  // namespace

QuantMix quant_mix_from_name(std::string_view name) {
  std::string lower(name);
  for (auto& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  if (lower == "q3_k" || lower == "q4_k" || lower == "q5_k") lower += "_s";
  for (const auto& m : kMixes) {
    if (m.name == lower) return m;
  }
  fail("unknown weight type '{}' (valid: {})", name, quant_mix_names());
}

std::string quant_mix_names() {
  std::string out;
  for (const auto& m : kMixes) {
    if (!out.empty()) out += ", ";
    out += m.name;
  }
  return out;
}

GgmlType tensor_type_for(const QuantMix& mix, const TensorSpec& spec, int64_t n_layer, bool tied_output) {
  if (spec.is_vector || spec.role == TensorRole::FfnGateInp) return GgmlType::F32;
  GgmlType type = mix.base;
  const bool quantized = type_traits(mix.base).quantized;
  const bool k_mix = mix.name.ends_with("_m");
  const bool head = spec.role == TensorRole::Output || (tied_output && spec.role == TensorRole::TokenEmbd);
  if (head && quantized && mix.base != GgmlType::Q8_0) type = GgmlType::Q6_K;
  const bool sensitive =
      spec.role == TensorRole::AttnV || spec.role == TensorRole::FfnDown || spec.role == TensorRole::FfnDownExps;
  if (k_mix && sensitive) {
    if (mix.base == GgmlType::Q3_K) {
      type = GgmlType::Q4_K;
    } else if (use_more_bits(spec.layer, n_layer)) {
      type = GgmlType::Q6_K;
    }
  }
  return fit_row(type, spec.ne[0]);
}

}  // namespace tessera
