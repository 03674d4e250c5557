// PrefetchChoice: an average of time per byte for each of a layout's two decode kernels, the faster one run except
// in short exploring runs of the other.
#include "tensor/prefetch_choice.h"

namespace tessera {
namespace {

// Weight of a call in its kernel's average: about the last eight calls count, so one call slowed by another task
// on the machine moves the choice little.
constexpr double kAlpha = 1.0 / 8;

}  // namespace

PrefetchChoice::Entry& PrefetchChoice::entry(const PackedGemm* fns) {
  for (Entry& e : entries_) {
    if (e.fns == fns) return e;
  }
  entries_.push_back(Entry{fns, {0, 0}, 0});
  return entries_.back();
}

bool PrefetchChoice::pick(const PackedGemm* fns) {
  Entry& e = entry(fns);
  const int64_t phase = e.calls++ % kPeriod;
  // The first period runs each kernel in turn before any average is compared; then the faster one, except for
  // the explore calls.
  const bool faster_prefetch = e.ns_per_byte[0] == 0 || e.ns_per_byte[1] <= e.ns_per_byte[0];
  return phase < kExplore ? !faster_prefetch : faster_prefetch;
}

void PrefetchChoice::record(const PackedGemm* fns, bool prefetch, uint64_t bytes, uint64_t ns) {
  if (bytes == 0) return;
  double& avg = entry(fns).ns_per_byte[prefetch ? 1 : 0];
  const double v = static_cast<double>(ns) / static_cast<double>(bytes);
  avg = avg == 0 ? v : avg + kAlpha * (v - avg);
}

double PrefetchChoice::ns_per_byte(const PackedGemm* fns, bool prefetch) const {
  for (const Entry& e : entries_) {
    if (e.fns == fns) return e.ns_per_byte[prefetch ? 1 : 0];
  }
  return 0;
}

}  // namespace tessera
