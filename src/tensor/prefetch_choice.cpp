// PrefetchChoice: per layout and shape, the running decode kernel's average time per byte and each other kernel's
// ratio to it, from short exploring runs; a kernel clearly faster takes over.
#include "tensor/prefetch_choice.h"

#include "tensor/kernels.h"

namespace tessera {
namespace {

// Weight of a call in the running kernel's average: about the last eight calls count, so one call slowed by another
// task on the machine moves it little.
constexpr double kAlpha = 1.0 / 8;
// Weight of an explored call in its kernel's ratio: a period's four calls replace most of the last period's.
constexpr double kExploreAlpha = 1.0 / 4;
// How much faster (ratio below 1 - kMargin) an explored kernel must be to take over, so that the odd lucky call
// does not switch kernels back and forth.
constexpr double kMargin = 0.05;

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

const PrefetchChoice::Entry* PrefetchChoice::find(const PackedGemm* fns, uint64_t bytes) const {
  for (const Entry& e : entries_) {
    if (e.fns == fns && e.bytes == bytes) return &e;
  }
  return nullptr;
}

PrefetchChoice::Entry& PrefetchChoice::entry(const PackedGemm* fns, uint64_t bytes) {
  for (Entry& e : entries_) {
    if (e.fns == fns && e.bytes == bytes) return e;
  }
  entries_.push_back(Entry{fns, bytes});
  return entries_.back();
}

DecodeKernel PrefetchChoice::pick(const PackedGemm* fns, uint64_t bytes) {
  Entry& e = entry(fns, bytes);
  const int64_t call = e.calls++;
  // The running kernel's time first, then each other kernel's ratio to it; then the running kernel, except for the
  // explore calls, which go to each of the others for a period in turn.
  if (e.running_ns_per_byte == 0) return e.running;
  DecodeKernel others[2];
  int n_others = 0;
  for (DecodeKernel k : kKernels) {
    if (!has_kernel(*fns, k) || k == e.running) continue;
    if (e.ratio[index_of(k)] == 0) return k;
    others[n_others++] = k;
  }
  const int64_t phase = call % kPeriod;
  if (n_others == 0 || phase >= kExplore) return e.running;
  const int64_t turn = call / kPeriod;
  const DecodeKernel k = others[turn % n_others];
  if (e.ratio[index_of(k)] > kFarRatio && turn / n_others % kFarTurns != 0) return e.running;
  return k;
}

void PrefetchChoice::record(const PackedGemm* fns, uint64_t bytes, DecodeKernel kernel, uint64_t ns) {
  if (bytes == 0) return;
  Entry& e = entry(fns, bytes);
  const double v = static_cast<double>(ns) / static_cast<double>(bytes);
  if (kernel == e.running || e.running_ns_per_byte == 0) {
    e.running = kernel;
    e.running_ns_per_byte =
        e.running_ns_per_byte == 0 ? v : e.running_ns_per_byte + kAlpha * (v - e.running_ns_per_byte);
    return;
  }
  double& r = e.ratio[index_of(kernel)];
  const double now = v / e.running_ns_per_byte;
  r = r == 0 ? now : r + kExploreAlpha * (now - r);
  if (r >= 1 - kMargin) return;
  // It takes over: the others' ratios now stand against it, and the one it replaces is 1 / r of it.
  const DecodeKernel old = e.running;
  const double q = r;
  for (DecodeKernel k : kKernels) {
    double& rk = e.ratio[index_of(k)];
    if (k == kernel) {
      rk = 0;
    } else if (k == old) {
      rk = 1 / q;
    } else if (rk != 0) {
      rk /= q;
    }
  }
  e.running = kernel;
  e.running_ns_per_byte *= q;
}

double PrefetchChoice::ns_per_byte(const PackedGemm* fns, uint64_t bytes, DecodeKernel kernel) const {
  const Entry* e = find(fns, bytes);
  if (e == nullptr) return 0;
  return kernel == e->running ? e->running_ns_per_byte : e->ratio[index_of(kernel)] * e->running_ns_per_byte;
}

}  // namespace tessera
