// PackedWeights: one aligned buffer per matrix, filled by the kernel path's pack function over the thread pool.
#include "tensor/packed_weights.h"

#include <algorithm>

namespace tessera {

size_t PackedWeights::bytes_for(const TensorView& w, const Kernels& kernels) {
  return w.empty() ? 0 : bytes_for(w.type, w.rows(), w.cols(), kernels);
}

size_t PackedWeights::bytes_for(GgmlType type, int64_t rows, int64_t cols, const Kernels& kernels) {
  const PackedGemm* fns = kernels.packed(type);
  if (fns == nullptr || rows <= 0 || cols <= 0) return 0;
  const int64_t groups = (rows + fns->group_rows - 1) / fns->group_rows;
  return static_cast<size_t>(groups) * fns->group_bytes(cols);
}

bool PackedWeights::pack(TensorView& w, const Kernels& kernels, ThreadPool& pool) {
  const size_t bytes = bytes_for(w, kernels);
  if (bytes == 0) return false;
  const PackedGemm* fns = kernels.packed(w.type);
  const size_t group_bytes = fns->group_bytes(w.cols());
  HugeBuffer buf(bytes);
  const int64_t groups = static_cast<int64_t>(bytes / group_bytes);
  const int64_t rows = w.rows();
  uint8_t* out = buf.data();
  pool.parallel_for(groups, [&](int64_t g0, int64_t g1) {
    const int64_t r0 = g0 * fns->group_rows;
    const int64_t r1 = std::min(rows, g1 * fns->group_rows);
    fns->pack(w.row(r0), w.row_bytes, r1 - r0, w.cols(), out + static_cast<size_t>(g0) * group_bytes);
  });
  w.packed = buf.data();
  w.packed_fns = fns;
  w.packed_group_bytes = group_bytes;
  w.packed_group_rows = fns->group_rows;
  buffers_.push_back(std::move(buf));
  bytes_ += bytes;
  return true;
}

}  // namespace tessera
