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
  size_t bytes() const { return bytes_; }

 private:
  std::vector<HugeBuffer> buffers_;  // streamed like the weights: huge pages spare the TLB
  size_t bytes_ = 0;
};

}  // namespace tessera
