// PrefetchChoice: each kernel tried, the faster one run outside short exploring runs, a change of pace followed.
#include "tensor/prefetch_choice.h"

#include <gtest/gtest.h>

#include "tensor/kernels.h"

namespace tessera {
namespace {

constexpr uint64_t kBytes = 1 << 20;

// Runs n calls on fns where a call with prefetch takes with_ns and one without without_ns; returns how many of
// them ran with it.
int run_calls(PrefetchChoice& c, const PackedGemm* fns, int n, uint64_t with_ns, uint64_t without_ns) {
  int with = 0;
  for (int i = 0; i < n; ++i) {
    const bool prefetch = c.pick(fns);
    with += prefetch ? 1 : 0;
    c.record(fns, prefetch, kBytes, prefetch ? with_ns : without_ns);
  }
  return with;
}

TEST(PrefetchChoice, TriesBothKernelsInItsFirstPeriod) {
  PrefetchChoice c;
  const PackedGemm fns{};
  for (int64_t i = 0; i < PrefetchChoice::kExplore; ++i) EXPECT_FALSE(c.pick(&fns)) << "call " << i;
  EXPECT_TRUE(c.pick(&fns));
  EXPECT_EQ(c.ns_per_byte(&fns, true), 0) << "nothing recorded yet";
}

TEST(PrefetchChoice, RunsTheFasterKernelExceptWhileExploring) {
  const PackedGemm fns{};
  const int n = 10 * PrefetchChoice::kPeriod;
  const int explore = 10 * PrefetchChoice::kExplore;
  {
    PrefetchChoice c;
    run_calls(c, &fns, PrefetchChoice::kPeriod, 1000, 2000);  // the first period: both measured
    EXPECT_EQ(run_calls(c, &fns, n, 1000, 2000), n - explore) << "prefetching is faster";
    EXPECT_NEAR(c.ns_per_byte(&fns, true), 1000.0 / kBytes, 1e-12);
    EXPECT_NEAR(c.ns_per_byte(&fns, false), 2000.0 / kBytes, 1e-12);
  }
  {
    PrefetchChoice c;
    run_calls(c, &fns, PrefetchChoice::kPeriod, 2000, 1000);
    EXPECT_EQ(run_calls(c, &fns, n, 2000, 1000), explore) << "not prefetching is faster";
  }
}

TEST(PrefetchChoice, FollowsAChangeOfPaceWithinAFewPeriods) {
  PrefetchChoice c;
  const PackedGemm fns{};
  run_calls(c, &fns, 4 * PrefetchChoice::kPeriod, 1000, 1300);  // prefetching 30% faster
  EXPECT_TRUE(c.ns_per_byte(&fns, true) < c.ns_per_byte(&fns, false));
  // The machine changes: now the kernel without prefetch is 30% faster.
  run_calls(c, &fns, 3 * PrefetchChoice::kPeriod, 1300, 1000);
  const int n = 4 * PrefetchChoice::kPeriod;
  EXPECT_EQ(run_calls(c, &fns, n, 1300, 1000), 4 * PrefetchChoice::kExplore);
}

TEST(PrefetchChoice, KeepsEachLayoutApart) {
  PrefetchChoice c;
  const PackedGemm a{}, b{};
  run_calls(c, &a, 4 * PrefetchChoice::kPeriod, 1000, 2000);
  run_calls(c, &b, 4 * PrefetchChoice::kPeriod, 2000, 1000);
  const int n = PrefetchChoice::kPeriod;
  EXPECT_EQ(run_calls(c, &a, n, 1000, 2000), n - PrefetchChoice::kExplore);
  EXPECT_EQ(run_calls(c, &b, n, 2000, 1000), PrefetchChoice::kExplore);
}

TEST(PrefetchChoice, IgnoresCallsOfNoBytes) {
  PrefetchChoice c;
  const PackedGemm fns{};
  c.record(&fns, true, 0, 5000);
  EXPECT_EQ(c.ns_per_byte(&fns, true), 0);
}

}  // namespace
}  // namespace tessera
