// PrefetchChoice: each kernel tried, the fastest one run outside short exploring runs of each other one in turn (a
// far slower one's less often), a change of pace followed, a layout's missing kernels never picked, calls of
// different shapes kept apart.
#include <gtest/gtest.h>

#include <array>

#include "tensor/kernels.h"
#include "tensor/prefetch_choice.h"

namespace tessera {
namespace {

constexpr uint64_t kBytes = 1 << 20;
constexpr int64_t kPeriod = PrefetchChoice::kPeriod;
constexpr int64_t kExplore = PrefetchChoice::kExplore;

void fake_gemm(const uint8_t*, int64_t, const uint8_t*, size_t, int64_t, int64_t, float*, int64_t) {}

// A layout with all three decode kernels (only their presence matters here).
PackedGemm three_kernels() {
  PackedGemm fns{};
  fns.gemm = &fake_gemm;
  fns.gemm_l2 = &fake_gemm;
  fns.gemm_unprefetched = &fake_gemm;
  return fns;
}

// Runs n calls on fns where a call of kernel k takes ns[k]; returns how many calls each kernel ran.
std::array<int, 3> run_calls(PrefetchChoice& c, const PackedGemm* fns, int64_t n, std::array<uint64_t, 3> ns) {
  std::array<int, 3> runs{};
  for (int64_t i = 0; i < n; ++i) {
    const DecodeKernel k = c.pick(fns, kBytes);
    const auto idx = static_cast<size_t>(k);
    ++runs[idx];
    c.record(fns, kBytes, k, ns[idx]);
  }
  return runs;
}

TEST(PrefetchChoice, TriesEachKernelOfTheLayoutFirst) {
  PrefetchChoice c;
  const PackedGemm fns = three_kernels();
  EXPECT_EQ(c.ns_per_byte(&fns, kBytes, DecodeKernel::L1), 0) << "nothing recorded yet";
  const auto runs = run_calls(c, &fns, 3, {1000, 1000, 1000});
  EXPECT_EQ(runs, (std::array<int, 3>{1, 1, 1}));
  for (DecodeKernel k : {DecodeKernel::L1, DecodeKernel::L2, DecodeKernel::Unprefetched}) {
    EXPECT_GT(c.ns_per_byte(&fns, kBytes, k), 0);
  }
}

TEST(PrefetchChoice, NeverPicksAKernelTheLayoutLacks) {
  PrefetchChoice c;
  PackedGemm fns = three_kernels();
  fns.gemm_unprefetched = nullptr;
  EXPECT_FALSE(has_kernel(fns, DecodeKernel::Unprefetched));
  EXPECT_TRUE(has_kernel(fns, DecodeKernel::L2));
  EXPECT_EQ(run_calls(c, &fns, kPeriod, {1100, 1000, 500})[2], 0);
  const auto runs = run_calls(c, &fns, 4 * kPeriod, {1100, 1000, 500});
  EXPECT_EQ(runs, (std::array<int, 3>{static_cast<int>(4 * kExplore), static_cast<int>(4 * (kPeriod - kExplore)), 0}));
  const PackedGemm only{};
  EXPECT_EQ(run_calls(c, &only, kPeriod, {1000, 1, 1}), (std::array<int, 3>{static_cast<int>(kPeriod), 0, 0}));
}

TEST(PrefetchChoice, RunsTheFastestKernelExceptWhileExploringEachOtherInTurn) {
  PrefetchChoice c;
  const PackedGemm fns = three_kernels();
  const std::array<uint64_t, 3> ns{1100, 1000, 1120};  // the others within kFarRatio of L2
  run_calls(c, &fns, kPeriod, ns);                     // every kernel measured
  const int64_t n = 10 * kPeriod;
  const auto runs = run_calls(c, &fns, n, ns);
  EXPECT_EQ(runs[1], n - 10 * kExplore) << "L2 is the fastest";
  EXPECT_EQ(runs[0], 5 * kExplore) << "L1 explored every other period";
  EXPECT_EQ(runs[2], 5 * kExplore) << "no prefetch explored every other period";
  EXPECT_NEAR(c.ns_per_byte(&fns, kBytes, DecodeKernel::L2), 1000.0 / kBytes, 1e-12);
  EXPECT_NEAR(c.ns_per_byte(&fns, kBytes, DecodeKernel::Unprefetched), 1120.0 / kBytes, 1e-12);
}

TEST(PrefetchChoice, ExploresAFarSlowerKernelOneTurnInKFarTurns) {
  PrefetchChoice c;
  const PackedGemm fns = three_kernels();
  const std::array<uint64_t, 3> ns{1100, 1000, 1600};  // L1 near L2, no prefetch far slower
  run_calls(c, &fns, kPeriod, ns);
  const int64_t turns = 4 * PrefetchChoice::kFarTurns;  // each of the two others has 2 x kFarTurns turns
  const auto runs = run_calls(c, &fns, turns * kPeriod, ns);
  EXPECT_EQ(runs[0], turns / 2 * kExplore) << "L1 explored at every one of its turns";
  EXPECT_EQ(runs[2], 2 * kExplore) << "no prefetch explored one turn in kFarTurns";
  EXPECT_EQ(runs[1], turns * kPeriod - runs[0] - runs[2]);
  EXPECT_NEAR(c.ns_per_byte(&fns, kBytes, DecodeKernel::Unprefetched), 1600.0 / kBytes, 1e-12);
}

TEST(PrefetchChoice, FollowsAChangeOfPaceWithinAFewPeriods) {
  PrefetchChoice c;
  PackedGemm fns = three_kernels();
  fns.gemm_l2 = nullptr;
  run_calls(c, &fns, 4 * kPeriod, {1000, 1, 1300});  // prefetching 30% faster
  EXPECT_LT(c.ns_per_byte(&fns, kBytes, DecodeKernel::L1), c.ns_per_byte(&fns, kBytes, DecodeKernel::Unprefetched));
  // The machine changes: now the kernel without prefetch is 30% faster. It stood 1.3x slower, past kFarRatio, so it
  // is explored one turn in kFarTurns: found within two rounds of those.
  run_calls(c, &fns, 2 * PrefetchChoice::kFarTurns * kPeriod, {1300, 1, 1000});
  // No prefetch runs; L1, now 1.3x slower than it, is explored one turn in kFarTurns.
  const int64_t n = PrefetchChoice::kFarTurns * kPeriod;
  const auto runs = run_calls(c, &fns, n, {1300, 1, 1000});
  EXPECT_EQ(runs[0], kExplore);
  EXPECT_EQ(runs[2], n - kExplore);
}

TEST(PrefetchChoice, KeepsEachLayoutApart) {
  PrefetchChoice c;
  const PackedGemm a = three_kernels(), b = three_kernels();
  run_calls(c, &a, 4 * kPeriod, {1000, 1100, 1100});
  run_calls(c, &b, 4 * kPeriod, {1100, 1000, 1100});
  EXPECT_EQ(run_calls(c, &a, kPeriod, {1000, 1100, 1100})[0], kPeriod - kExplore);
  EXPECT_EQ(run_calls(c, &b, kPeriod, {1100, 1000, 1100})[1], kPeriod - kExplore);
}

// Two shapes of one layout, called in turn: the small one slower per byte with every kernel (as a 2.4 MB matrix
// against a 13 MB one). L1 is the faster on each, so L2 runs only while explored: compared across the shapes, L2's
// explored time on the big one would beat L1's recent time on the small one.
TEST(PrefetchChoice, ComparesCallsOfOneShapeOnly) {
  PrefetchChoice c;
  PackedGemm fns = three_kernels();
  fns.gemm_unprefetched = nullptr;
  constexpr uint64_t kSmall = kBytes, kBig = 4 * kBytes;
  const std::array<uint64_t, 2> small_ns{3000, 3600}, big_ns{4 * 1000, 4 * 1200};  // L1, L2
  std::array<int, 2> l2_runs{};
  const int64_t n = 8 * kPeriod;
  for (int64_t i = 0; i < 2 * n; ++i) {
    const bool big = i % 2 == 1;
    const uint64_t bytes = big ? kBig : kSmall;
    const DecodeKernel k = c.pick(&fns, bytes);
    ASSERT_NE(k, DecodeKernel::Unprefetched);
    const auto idx = static_cast<size_t>(k);
    if (k == DecodeKernel::L2) ++l2_runs[big ? 1 : 0];
    c.record(&fns, bytes, k, (big ? big_ns : small_ns)[idx]);
  }
  EXPECT_LE(l2_runs[0], 8 * kExplore) << "small shape";
  EXPECT_LE(l2_runs[1], 8 * kExplore) << "big shape";
  EXPECT_NEAR(c.ns_per_byte(&fns, kSmall, DecodeKernel::L1), 3000.0 / kSmall, 1e-12);
  EXPECT_NEAR(c.ns_per_byte(&fns, kBig, DecodeKernel::L1), 1000.0 / kBytes, 1e-12);
}

TEST(PrefetchChoice, IgnoresCallsOfNoBytes) {
  PrefetchChoice c;
  const PackedGemm fns = three_kernels();
  c.record(&fns, 0, DecodeKernel::L2, 5000);
  EXPECT_EQ(c.ns_per_byte(&fns, kBytes, DecodeKernel::L2), 0);
}

}  // namespace
}  // namespace tessera
