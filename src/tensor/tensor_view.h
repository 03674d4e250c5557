// A non-owning view of a weight matrix in any GGUF type (usually memory-mapped file data), row by row.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "tensor/ggml_type.h"

namespace tessera {

struct PackedGemm;

struct TensorView {
  GgmlType type = GgmlType::F32;
  std::array<int64_t, 4> ne = {1, 1, 1, 1};  // ne[0]: elements per row
  const uint8_t* data = nullptr;
  size_t row_bytes = 0;
  // The same rows packed at load for the CPU's gemm (see PackedGemm), or null.
  const uint8_t* packed = nullptr;
  const PackedGemm* packed_fns = nullptr;
  size_t packed_group_bytes = 0;
  int packed_group_rows = 0;

  bool empty() const { return data == nullptr; }
  int64_t cols() const { return ne[0]; }
  int64_t rows() const { return ne[1] * ne[2] * ne[3]; }
  const uint8_t* row(int64_t r) const { return data + static_cast<size_t>(r) * row_bytes; }
  // Rows [first, first + count) as a 2-D view (an expert's slice of a 3-D tensor, a tensor-parallel shard).
  TensorView slice_rows(int64_t first, int64_t count) const {
    TensorView v = *this;
    v.ne = {ne[0], count, 1, 1};
    v.data = row(first);
    if (packed != nullptr && first % packed_group_rows == 0) {
      v.packed = packed + static_cast<size_t>(first / packed_group_rows) * packed_group_bytes;
    } else {
      v.packed = nullptr;
      v.packed_fns = nullptr;
    }
    return v;
  }
};

}  // namespace tessera
