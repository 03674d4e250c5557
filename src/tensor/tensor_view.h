// A non-owning view of a weight matrix in any GGUF type (usually memory-mapped file data), row by row.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "tensor/ggml_type.h"

namespace tessera {

struct PackedGemm;

// Rows rewritten at load into a kernel's layout (see PackedGemm): groups of fns->group_rows rows, group_bytes apart.
struct PackedRows {
  const uint8_t* data = nullptr;
  const PackedGemm* fns = nullptr;
  size_t group_bytes = 0;
  int group_rows = 0;

  bool empty() const { return data == nullptr; }
  // The same layout from row `first` on; empty when `first` is not on a group boundary.
  PackedRows from_row(int64_t first) const {
    if (data == nullptr || first % group_rows != 0) return {};
    PackedRows p = *this;
    p.data += static_cast<size_t>(first / group_rows) * group_bytes;
    return p;
  }
};

struct TensorView {
  GgmlType type = GgmlType::F32;
  std::array<int64_t, 4> ne = {1, 1, 1, 1};  // ne[0]: elements per row
  const uint8_t* data = nullptr;
  size_t row_bytes = 0;
  // The same rows packed at load by --repack for the CPU's prefill tiles, or empty.
  PackedRows packed;
  // The same rows as panels, written by the weights' copy in place of the rows (which then stay readable only in
  // the mapped file, for the calls the panels do not serve), or empty.
  PackedRows panels;

  bool empty() const { return data == nullptr; }
  int64_t cols() const { return ne[0]; }
  int64_t rows() const { return ne[1] * ne[2] * ne[3]; }
  const uint8_t* row(int64_t r) const { return data + static_cast<size_t>(r) * row_bytes; }
  // Rows [first, first + count) as a 2-D view (an expert's slice of a 3-D tensor, a tensor-parallel shard).
  TensorView slice_rows(int64_t first, int64_t count) const {
    TensorView v = *this;
    v.ne = {ne[0], count, 1, 1};
    v.data = row(first);
    v.packed = packed.from_row(first);
    v.panels = panels.from_row(first);
    return v;
  }
};

}  // namespace tessera
