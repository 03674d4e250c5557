// PrefetchChoice: which of a panel layout's decode kernels (prefetching into L1, into L2, or not at all) matmul
// runs, learnt from the bytes per second each reached in recent calls, because which one streams fastest depends on
// the CPU and on the machine's moment, and a shared VM switches between states within minutes
// (docs/perf-log/decode-prefetch.md).
#pragma once

#include <cstdint>
#include <vector>

namespace tessera {

struct PackedGemm;

// A layout's decode kernels: PackedGemm's gemm, gemm_l2 and gemm_unprefetched.
enum class DecodeKernel { L1 = 0, L2 = 1, Unprefetched = 2 };

class PrefetchChoice {
 public:
  // Of every kPeriod calls of a layout and shape, kExplore in a row run one of the other kernels (each in turn), so
  // a change of the machine's state is noticed within a few seconds of decode (a model calls each shape a few
  // dozen times a step); a shorter period explores a slow kernel too often to pay (docs/perf-log/decode-prefetch.md).
  static constexpr int64_t kPeriod = 128;
  static constexpr int64_t kExplore = 4;
  // A kernel whose ratio to the running one is above kFarRatio is explored one turn in kFarTurns: where one kernel is
  // far faster than the others, exploring those at the full rate costs a visible share of decode; a change of the
  // machine's state that turns a far kernel into the fastest is still found within 2 x kFarTurns periods of its
  // shape (a fraction of a second of decode).
  static constexpr double kFarRatio = 1.15;
  static constexpr int64_t kFarTurns = 4;

  // Calls are told apart by layout and by their bytes of weights (every job of the call counted), and an explored
  // kernel is judged by its time over the running kernel's recent average on the same shape, not by an average of
  // its own: the VM's memory changes pace within seconds, and an explored kernel's own average, from a few calls a
  // period ago, would be compared with a running average of now, and a slow kernel would run far more often than its
  // exploring turns (docs/perf-log/decode-prefetch.md).
  // The kernel the next such call runs: one of those fns has.
  DecodeKernel pick(const PackedGemm* fns, uint64_t bytes);
  // How long a call that pick() chose `kernel` for took.
  void record(const PackedGemm* fns, uint64_t bytes, DecodeKernel kernel, uint64_t ns);
  // The running kernel's average nanoseconds per byte on such calls, or another kernel's as that times its ratio to
  // the running one; 0 before its first call.
  double ns_per_byte(const PackedGemm* fns, uint64_t bytes, DecodeKernel kernel) const;

 private:
  struct Entry {
    const PackedGemm* fns = nullptr;
    uint64_t bytes = 0;
    int64_t calls = 0;
    DecodeKernel running = DecodeKernel::L1;  // the kernel run outside exploring calls
    double running_ns_per_byte = 0;           // its recent average; 0 before its first call
    double ratio[3] = {0, 0, 0};              // by DecodeKernel: explored time over running_ns_per_byte; 0 untried
  };
  Entry& entry(const PackedGemm* fns, uint64_t bytes);
  const Entry* find(const PackedGemm* fns, uint64_t bytes) const;
  std::vector<Entry> entries_;  // one per layout and shape met: a few dozen at most
};

// Whether fns has that kernel (gemm always; the others where not null).
bool has_kernel(const PackedGemm& fns, DecodeKernel kernel);

}  // namespace tessera
