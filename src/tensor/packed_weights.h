// Weight matrices repacked once at load into the layout the CPU's gemm tiles read (PackedGemm), so prefill and
// batched decode stop paying a repack per call. Costs memory next to the mapped file: bytes() reports it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "tensor/kernels.h"
#include "tensor/tensor_view.h"
#include "util/huge_buffer.h"
#include "util/thread_pool.h"

namespace tessera {

class PackedWeights {
 public:
  // Packs w's rows with the kernels' layout for its type and points w at them. Returns false, leaving w as it
  // was, when the path has no packed layout for the type (or w is empty).
  bool pack(TensorView& w, const Kernels& kernels, ThreadPool& pool);
  // The packed size pack() would allocate for w (0 when it would not pack).
  static size_t bytes_for(const TensorView& w, const Kernels& kernels);
  // The same for a matrix of `rows` rows of `cols` elements of `type` (all rows of a 3-d expert tensor): the one
  // size rule, shared with the planner and the worker's memory check, which count the copy before it exists.
  static size_t bytes_for(GgmlType type, int64_t rows, int64_t cols, const Kernels& kernels);
  size_t bytes() const { return bytes_; }

  // Panels (Kernels::panels) take the place of a matrix's rows in the weights' copy rather than adding to them.
  static size_t panel_bytes(const TensorView& w, const PackedGemm& panels);
  // Writes w's panels to out (64-byte aligned, panel_bytes long) over the pool.
  static void write_panels(const TensorView& w, const PackedGemm& panels, uint8_t* out, ThreadPool& pool);
  // w's rows in fns' layout at p.
  static PackedRows rows_at(const TensorView& w, const PackedGemm& fns, const uint8_t* p);

 private:
  std::vector<HugeBuffer> buffers_;  // streamed like the weights: huge pages spare the TLB
  size_t bytes_ = 0;
};

}  // namespace tessera
