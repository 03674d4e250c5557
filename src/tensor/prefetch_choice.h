// PrefetchChoice: which of a panel layout's two decode kernels (with software prefetch or without) matmul runs,
// learnt from the bytes per second each reached in recent calls, because which one streams faster depends on the
// machine's moment: on the Zen 5 VM Q8_0's decode without it ran 6-21% faster in one state and 2-5% slower in the
// other, and the VM switched between them within minutes (docs/benchmarks.md).
#pragma once

#include <cstdint>
#include <vector>

namespace tessera {

struct PackedGemm;

class PrefetchChoice {
 public:
  // Of every kPeriod calls on a layout, kExplore in a row run the kernel that looks slower, so a change of the
  // machine's state is noticed within a few decode steps; each keeps an average of the last calls' time per byte.
  static constexpr int64_t kPeriod = 32;
  static constexpr int64_t kExplore = 4;

  // Whether the next call on `fns` runs its prefetching kernel (gemm) rather than gemm_unprefetched.
  bool pick(const PackedGemm* fns);
  // How long a call that pick() chose `prefetch` for took on `bytes` of weights (every job of the call counted).
  void record(const PackedGemm* fns, bool prefetch, uint64_t bytes, uint64_t ns);
  // The average nanoseconds per byte of the kernel with (prefetch) or without it; 0 before its first call.
  double ns_per_byte(const PackedGemm* fns, bool prefetch) const;

 private:
  struct Entry {
    const PackedGemm* fns = nullptr;
    double ns_per_byte[2] = {0, 0};  // [0]: without, [1]: with
    int64_t calls = 0;
  };
  Entry& entry(const PackedGemm* fns);
  std::vector<Entry> entries_;  // one per layout met: a handful
};

}  // namespace tessera
