// The table of ggml tensor types: block sizes and bytes per block, as the GGUF format defines them.
#include "tensor/ggml_type.h"

#include <array>
#include <cctype>

#include "util/error.h"

namespace tessera {
namespace {

constexpr std::array kTraits = {
    TypeTraits{GgmlType::F32, "f32", 1, 4, false, true},
    TypeTraits{GgmlType::F16, "f16", 1, 2, false, true},
    TypeTraits{GgmlType::Q4_0, "q4_0", 32, 18, true, true},
    TypeTraits{GgmlType::Q4_1, "q4_1", 32, 20, true, true},
    TypeTraits{GgmlType::Q5_0, "q5_0", 32, 22, true, true},
    TypeTraits{GgmlType::Q5_1, "q5_1", 32, 24, true, true},
    TypeTraits{GgmlType::Q8_0, "q8_0", 32, 34, true, true},
    TypeTraits{GgmlType::Q8_1, "q8_1", 32, 36, true, true},
    TypeTraits{GgmlType::Q2_K, "q2_K", 256, 84, true, true},
    TypeTraits{GgmlType::Q3_K, "q3_K", 256, 110, true, true},
    TypeTraits{GgmlType::Q4_K, "q4_K", 256, 144, true, true},
    TypeTraits{GgmlType::Q5_K, "q5_K", 256, 176, true, true},
    TypeTraits{GgmlType::Q6_K, "q6_K", 256, 210, true, true},
    TypeTraits{GgmlType::Q8_K, "q8_K", 256, 292, true, true},
    TypeTraits{GgmlType::IQ2_XXS, "iq2_xxs", 256, 66, true, false},
    TypeTraits{GgmlType::IQ2_XS, "iq2_xs", 256, 74, true, false},
    TypeTraits{GgmlType::IQ3_XXS, "iq3_xxs", 256, 98, true, false},
    TypeTraits{GgmlType::IQ1_S, "iq1_s", 256, 50, true, false},
    TypeTraits{GgmlType::IQ4_NL, "iq4_nl", 32, 18, true, true},
    TypeTraits{GgmlType::IQ3_S, "iq3_s", 256, 110, true, false},
    TypeTraits{GgmlType::IQ2_S, "iq2_s", 256, 82, true, false},
    TypeTraits{GgmlType::IQ4_XS, "iq4_xs", 256, 136, true, true},
    TypeTraits{GgmlType::I8, "i8", 1, 1, false, false},
    TypeTraits{GgmlType::I16, "i16", 1, 2, false, false},
    TypeTraits{GgmlType::I32, "i32", 1, 4, false, false},
    TypeTraits{GgmlType::I64, "i64", 1, 8, false, false},
    TypeTraits{GgmlType::F64, "f64", 1, 8, false, false},
    TypeTraits{GgmlType::IQ1_M, "iq1_m", 256, 56, true, false},
    TypeTraits{GgmlType::BF16, "bf16", 1, 2, false, true},
    TypeTraits{GgmlType::TQ1_0, "tq1_0", 256, 54, true, false},
    TypeTraits{GgmlType::TQ2_0, "tq2_0", 256, 66, true, false},
    TypeTraits{GgmlType::MXFP4, "mxfp4", 32, 17, true, false},
};

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
  }
  return true;
}

}  // namespace

std::optional<TypeTraits> find_type_traits(uint32_t id) {
  for (const auto& t : kTraits) {
    if (static_cast<uint32_t>(t.type) == id) return t;
  }
  return std::nullopt;
}

const TypeTraits& type_traits(GgmlType type) {
  for (const auto& t : kTraits) {
    if (t.type == type) return t;
  }
  fail("unknown tensor type id {}", static_cast<uint32_t>(type));
}

std::optional<GgmlType> type_from_name(std::string_view name) {
  for (const auto& t : kTraits) {
    if (iequals(t.name, name)) return t.type;
  }
  return std::nullopt;
}

std::string_view type_name(GgmlType type) { return type_traits(type).name; }

size_t row_size(GgmlType type, int64_t n) {
  const auto& t = type_traits(type);
  if (n < 0 || n % t.block_size != 0) {
    fail("a row of {} elements is not a whole number of {} blocks ({} elements each)", n, t.name, t.block_size);
  }
  return static_cast<size_t>(n / t.block_size) * t.type_size;
}

}  // namespace tessera
