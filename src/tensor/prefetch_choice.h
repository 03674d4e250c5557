// PrefetchChoice: which of a panel layout's decode kernels (prefetching into L1, into L2, or not at all) matmul
// runs, learnt from the bytes per second each reached in recent calls, because which one streams fastest depends on
// the CPU and on the machine's moment: on the Zen 5 VM Q8_0's decode without prefetch ran 6-21% faster in one state
// and 2-5% slower in the other, and the VM switched between them within minutes; on a Zen 4 VM the panels' decode
// steps took 2-22% less time prefetching into L2 than into L1, on the Zen 5 4-17% more (docs/benchmarks.md).
#pragma once

#include <cstdint>
#include <vector>

namespace tessera {

struct PackedGemm;

// A layout's decode kernels: PackedGemm's gemm, gemm_l2 and gemm_unprefetched.
enum class DecodeKernel { L1 = 0, L2 = 1, Unprefetched = 2 };

class PrefetchChoice {
 public:
  // Of every kPeriod calls on a layout, kExplore in a row run one of the kernels that look slower (each in turn), so
  // a change of the machine's state is noticed within a few decode steps (1b has ~90 matmul calls a step); each
  // keeps an average of the last calls' time per byte. On the Zen 4 VM, where prefetching into L1 took up to 22%
  // longer, a period of 32 cost 3-4% against always running the fastest kernel, 128 within 1%.
  static constexpr int64_t kPeriod = 128;
  static constexpr int64_t kExplore = 4;

  // The kernel the next call on `fns` runs: one of those fns has.
  DecodeKernel pick(const PackedGemm* fns);
  // How long a call that pick() chose `kernel` for took on `bytes` of weights (every job of the call counted).
  void record(const PackedGemm* fns, DecodeKernel kernel, uint64_t bytes, uint64_t ns);
  // The average nanoseconds per byte of that kernel; 0 before its first call.
  double ns_per_byte(const PackedGemm* fns, DecodeKernel kernel) const;

 private:
  struct Entry {
    const PackedGemm* fns = nullptr;
    double ns_per_byte[3] = {0, 0, 0};  // by DecodeKernel
    int64_t calls = 0;
  };
  Entry& entry(const PackedGemm* fns);
  std::vector<Entry> entries_;  // one per layout met: a handful
};

// Whether fns has that kernel (gemm always; the others where not null).
bool has_kernel(const PackedGemm& fns, DecodeKernel kernel);

}  // namespace tessera
