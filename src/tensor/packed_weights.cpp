// PackedWeights: one aligned buffer per matrix, filled by the kernel path's pack function over the thread pool.
#include "tensor/packed_weights.h"

#include <algorithm>

namespace tessera {

size_t PackedWeights::bytes_for(const TensorView& w, const Kernels& kernels) {
  return w.empty() ? 0 : bytes_for(w.type, w.rows(), w.cols(), kernels);
}

namespace {

// The one size rule of a packed layout (tiles or panels): whole groups of group_rows rows.
size_t layout_bytes(const PackedGemm& fns, int64_t rows, int64_t cols) {
  if (rows <= 0 || cols <= 0) return 0;
  const int64_t groups = (rows + fns.group_rows - 1) / fns.group_rows;
  return static_cast<size_t>(groups) * fns.group_bytes(cols);
}

// Packs all of w's rows in groups over the pool.
void pack_groups(const TensorView& w, const PackedGemm& fns, uint8_t* out, ThreadPool& pool) {
  const size_t group_bytes = fns.group_bytes(w.cols());
  const int64_t rows = w.rows();
  const int64_t groups = (rows + fns.group_rows - 1) / fns.group_rows;
  pool.parallel_for(groups, [&](int64_t g0, int64_t g1) {
    const int64_t r0 = g0 * fns.group_rows;
    const int64_t r1 = std::min(rows, g1 * fns.group_rows);
    fns.pack(w.row(r0), w.row_bytes, r1 - r0, w.cols(), out + static_cast<size_t>(g0) * group_bytes);
  });
}

}  // namespace

size_t PackedWeights::bytes_for(GgmlType type, int64_t rows, int64_t cols, const Kernels& kernels) {
  const PackedGemm* fns = kernels.packed(type);
  return fns == nullptr ? 0 : layout_bytes(*fns, rows, cols);
}

bool PackedWeights::pack(TensorView& w, const Kernels& kernels, ThreadPool& pool) {
  const size_t bytes = bytes_for(w, kernels);
  if (bytes == 0) return false;
  const PackedGemm* fns = kernels.packed(w.type);
  HugeBuffer buf(bytes);
  pack_groups(w, *fns, buf.data(), pool);
  w.packed = rows_at(w, *fns, buf.data());
  buffers_.push_back(std::move(buf));
  bytes_ += bytes;
  return true;
}

size_t PackedWeights::panel_bytes(const TensorView& w, const PackedGemm& panels) {
  return layout_bytes(panels, w.rows(), w.cols());
}

void PackedWeights::write_panels(const TensorView& w, const PackedGemm& panels, uint8_t* out, ThreadPool& pool) {
  pack_groups(w, panels, out, pool);
}

PackedRows PackedWeights::rows_at(const TensorView& w, const PackedGemm& fns, const uint8_t* p) {
  return {p, &fns, fns.group_bytes(w.cols()), fns.group_rows};
}

}  // namespace tessera
