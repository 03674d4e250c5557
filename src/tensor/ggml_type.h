// The GGUF/ggml tensor element types: ids, names, block layouts and byte sizes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace tessera {

// Numeric values are the ggml type ids stored in GGUF files; never renumber.
enum class GgmlType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  IQ2_XXS = 16,
  IQ2_XS = 17,
  IQ3_XXS = 18,
  IQ1_S = 19,
  IQ4_NL = 20,
  IQ3_S = 21,
  IQ2_S = 22,
  IQ4_XS = 23,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  IQ1_M = 29,
  BF16 = 30,
  TQ1_0 = 34,
  TQ2_0 = 35,
  MXFP4 = 39,
};

struct TypeTraits {
  GgmlType type;
  std::string_view name;  // as ggml spells it: "f32", "q4_K", ...
  int64_t block_size;     // elements per block (1 for plain types)
  size_t type_size;       // bytes per block
  bool quantized;
  bool can_dequantize;  // Tessera can turn it into f32 (so the engine can use it as a weight)
};

// Traits of a known type id, or nullopt for an id no GGUF writer uses.
std::optional<TypeTraits> find_type_traits(uint32_t id);
// Traits of a type; every enumerator is known.
const TypeTraits& type_traits(GgmlType type);
// "f32", "Q4_K", "q8_0" ... (case-insensitive) -> type.
std::optional<GgmlType> type_from_name(std::string_view name);
std::string_view type_name(GgmlType type);

// Bytes of a row of n elements. Throws Error when n is not a multiple of the block size.
size_t row_size(GgmlType type, int64_t n);

}  // namespace tessera
