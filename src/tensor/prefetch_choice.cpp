// PrefetchChoice: an average of time per byte for each of a layout's decode kernels, the fastest one run except in
// short exploring runs of the others.
#include "tensor/prefetch_choice.h"

#include "tensor/kernels.h"

namespace tessera {
namespace {

// Weight of a call in its kernel's average: about the last eight calls count, so one call slowed by another task
// on the machine moves the choice little.
constexpr double kAlpha = 1.0 / 8;

constexpr DecodeKernel kKernels[] = {DecodeKernel::L1, DecodeKernel::L2, DecodeKernel::Unprefetched};

int index_of(DecodeKernel k) { return static_cast<int>(k); }

}  // namespace

bool has_kernel(const PackedGemm& fns, DecodeKernel kernel) {
  switch (kernel) {
    case DecodeKernel::L1:
      return true;
    case DecodeKernel::L2:
      return fns.gemm_l2 != nullptr;
    case DecodeKernel::Unprefetched:
      return fns.gemm_unprefetched != nullptr;
  }
  return false;
}

PrefetchChoice::Entry& PrefetchChoice::entry(const PackedGemm* fns) {
  for (Entry& e : entries_) {
    if (e.fns == fns) return e;
  }
  entries_.push_back(Entry{fns, {0, 0, 0}, 0});
  return entries_.back();
}

DecodeKernel PrefetchChoice::pick(const PackedGemm* fns) {
  Entry& e = entry(fns);
  const int64_t call = e.calls++;
  // A kernel without a time yet first; then the fastest, except for the explore calls, which go to each of the
  // others for a period in turn.
  DecodeKernel best = DecodeKernel::L1;
  DecodeKernel others[2];
  int n_others = 0;
  for (DecodeKernel k : kKernels) {
    if (!has_kernel(*fns, k)) continue;
    if (e.ns_per_byte[index_of(k)] == 0) return k;
    if (e.ns_per_byte[index_of(k)] < e.ns_per_byte[index_of(best)]) best = k;
  }
  for (DecodeKernel k : kKernels) {
    if (has_kernel(*fns, k) && k != best) others[n_others++] = k;
  }
  const int64_t phase = call % kPeriod;
  if (n_others == 0 || phase >= kExplore) return best;
  return others[(call / kPeriod) % n_others];
}

void PrefetchChoice::record(const PackedGemm* fns, DecodeKernel kernel, uint64_t bytes, uint64_t ns) {
  if (bytes == 0) return;
  double& avg = entry(fns).ns_per_byte[index_of(kernel)];
  const double v = static_cast<double>(ns) / static_cast<double>(bytes);
  avg = avg == 0 ? v : avg + kAlpha * (v - avg);
}

double PrefetchChoice::ns_per_byte(const PackedGemm* fns, DecodeKernel kernel) const {
  for (const Entry& e : entries_) {
    if (e.fns == fns) return e.ns_per_byte[index_of(kernel)];
  }
  return 0;
}

}  // namespace tessera
