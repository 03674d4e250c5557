// Pipelines of rank groups under mpirun (--tp N --pp P) in the planner: the run's own row adds each stage's slowest
// shard, its collectives at the measured cost and the activations' hop between stages; and the stages' layers cut
// by bytes when their machines are alike, by speed when they differ.
#include <gtest/gtest.h>

#include <thread>

#include "collective/sweep.h"
#include "collective/thread_group.h"
#include "plan/collective_model.h"
#include "plan/planner.h"
#include "plan/split_spec.h"
#include "support/plan_fixtures.h"
#include "util/error.h"

namespace tessera::plan {
namespace {

using test::parted_model;
using test::plan_vm;

TEST(PipelinePlan, TensorTimesPipelineAddsStagesCollectivesAndTheActivationsHop) {
  const ModelCost m = parted_model();
  // Four ranks; the point-to-point between stages measured at 10 us + 16 KiB at 2 GB/s (as the link of the ranks).
  const double rtt = 20e-6, gbit = 16.0;
  const Cluster c({plan_vm("rank0", 20), plan_vm("rank1", 20), plan_vm("rank2", 20), plan_vm("rank3", 20)}, "rank0", {},
                  LinkProfile{"*", "*", rtt, gbit, "point-to-point measured at start"});
  PlanConstants k;
  k.layer_overhead_s = k.stage_overhead_s = k.message_overhead_s = 0;
  k.wire_bytes_per_value = 4;
  PlanOptions o;
  o.workload.prompt_tokens = 512;
  o.workload.n_gen = 128;
  o.workload.n_ctx = 4096;
  o.mpi_ranks = true;
  o.run = PlanOptions::ParallelRun{ParallelMode::Tensor, {}};
  o.run->pp = 2;
  o.run->stage_layers = {{0, 3}, {4, 7}};
  const CollectiveProfile measured = fit_collectives(2, {{4, 20e-6}, {32768, 40e-6}, {4194304, 3e-3}}, "measured");
  o.run->stage_collectives = measured;
  const Plan p = make_plan(m, c, o, k);
  const Strategy& mine = p.strategies.back();
  EXPECT_EQ(mine.name, "your --tp 2 --pp 2");
  EXPECT_EQ(mine.kind, StrategyKind::TensorPipeline);
  EXPECT_TRUE(mine.runnable);
  ASSERT_EQ(mine.parallel.size(), 2u);
  // Stage 0 is ranks 2 and 3, stage 1 (the last, where tokens are sampled) ranks 0 and 1.
  EXPECT_EQ(mine.parallel[0].nodes, (std::vector<std::string>{"rank2", "rank3"}));
  EXPECT_EQ(mine.parallel[1].nodes, (std::vector<std::string>{"rank0", "rank1"}));
  EXPECT_EQ(mine.parallel[0].last, 3);
  EXPECT_EQ(mine.parallel[1].first, 4);

  // By hand: each stage's slowest shard reads half of 4 layers of 1 GB at 20 GB/s x the efficiency.
  const double shard_s = 2e9 / (20e9 * k.bandwidth_efficiency);
  // 8 all-reduces of one token's activations (4096 f32 = 16 KiB) per stage, between the 4 B and 32 KiB samples.
  const double reduce_s = 20e-6 + (16384.0 - 4) * 20e-6 / (32768 - 4);
  EXPECT_NEAR(mine.parallel[0].decode.all_reduce_s, reduce_s, 1e-12);
  EXPECT_EQ(mine.parallel[0].decode.all_reduces, 8);
  EXPECT_NEAR(mine.parallel[0].decode.ranks[mine.parallel[0].decode.slowest].t.memory, shard_s, 1e-9);
  // The hops: the token ids from rank 0 to stage 0 (16 B), the activations to stage 1 (16 KiB); none back.
  const double bps = gbit * 1e9 / 8;
  const double hops_s = (rtt / 2 + 16.0 / bps) + (rtt / 2 + 16384.0 / bps);
  const double token_s = mine.parallel[0].decode.total.total() + mine.parallel[1].decode.total.total() + hops_s;
  EXPECT_NEAR(1.0 / mine.pred.decode_tps_1, token_s, 1e-9);
  EXPECT_NEAR(mine.parallel[0].decode.collectives.total(),
              8 * reduce_s + measured.all_reduce_s(8) + measured.all_reduce_s(16), 1e-12);
  EXPECT_GT(token_s, 2 * shard_s + 16 * reduce_s);

  // The arithmetic printed at start names every part.
  std::string text;
  for (const auto& l : mine.arithmetic) text += l + "\n";
  EXPECT_NE(text.find("layers 0-3: "), std::string::npos) << text;
  EXPECT_NE(text.find("layers 4-7: "), std::string::npos) << text;
  EXPECT_NE(text.find("+ 8 all-reduces of 16 KiB"), std::string::npos) << text;
  EXPECT_NE(text.find("+ 1 hop of 16 KiB activations between stages"), std::string::npos) << text;
  EXPECT_NE(text.find("point-to-point measured at start"), std::string::npos) << text;

  // Prefill overlaps the stages: 4 micro-batches of 128 take about 2 + 3 stage passes, not 4 x 2 (each pass here
  // reads the stage's weights, as long for 128 tokens as for 512).
  PlanOptions whole = o, parts = o;
  whole.workload.micro_batch = 512;
  parts.workload.micro_batch = 128;
  const Prediction one_batch = make_plan(m, c, whole, k).strategies.back().pred;
  const Prediction four = make_plan(m, c, parts, k).strategies.back().pred;
  EXPECT_EQ(four.micro_batch, 128);
  EXPECT_GT(four.prefill_s, one_batch.prefill_s);
  EXPECT_LT(four.prefill_s, 0.75 * 4 * one_batch.prefill_s);
}

TEST(PipelinePlan, PlainPipelineOfRanksIsTheRunsRow) {
  const ModelCost m = parted_model();
  const Cluster c({plan_vm("rank0", 20), plan_vm("rank1", 20)}, "rank0", {},
                  LinkProfile{"*", "*", 20e-6, 16, "point-to-point measured at start"});
  PlanOptions o;
  o.workload.n_ctx = 4096;
  o.mpi_ranks = true;
  o.run = PlanOptions::ParallelRun{ParallelMode::Tensor, {}};
  o.run->pp = 2;
  o.run->stage_layers = {{0, 3}, {4, 7}};
  const Plan p = make_plan(m, c, o);
  const Strategy& mine = p.strategies.back();
  EXPECT_EQ(mine.name, "your --pp 2");
  EXPECT_EQ(mine.kind, StrategyKind::UserSplit);
  EXPECT_TRUE(mine.runnable);
  ASSERT_EQ(mine.stages.size(), 2u);
  EXPECT_EQ(mine.stages[0].node, "rank1");
  EXPECT_EQ(mine.stages[1].node, "rank0");
  EXPECT_GT(mine.pred.decode_tps_1, 0);
}

TEST(StageSplit, AlikeStagesSplitByBytesAndUnequalOnesBySpeed) {
  const std::vector<uint64_t> bytes(12, 100);
  const std::vector<double> alike = {20e9, 21e9};
  const StageSplit even = split_by_speed(bytes, alike);
  EXPECT_FALSE(even.by_speed);
  EXPECT_EQ(even.counts, (std::vector<int64_t>{6, 6}));
  EXPECT_NE(even.reason.find("by bytes"), std::string::npos) << even.reason;
  const std::vector<uint64_t> uneven_bytes = {100, 100, 100, 100, 100, 100, 100, 100, 100, 100, 100, 300};
  EXPECT_EQ(split_by_speed(uneven_bytes, alike).counts, (std::vector<int64_t>{7, 5}));

  // One stage twice as fast: about twice the bytes.
  const std::vector<double> unequal = {40e9, 20e9};
  const StageSplit fast = split_by_speed(bytes, unequal);
  EXPECT_TRUE(fast.by_speed);
  EXPECT_EQ(fast.counts, (std::vector<int64_t>{8, 4}));
  EXPECT_NE(fast.reason.find("by speed: the stages read at 40.0/20.0 GB/s"), std::string::npos) << fast.reason;
  const std::vector<double> three = {10e9, 10e9, 20e9};
  EXPECT_EQ(split_by_speed(bytes, three).counts, (std::vector<int64_t>{3, 3, 6}));
  // A stage so slow it would get no layer is an error, not an empty stage.
  const std::vector<uint64_t> two(2, 100);
  const std::vector<double> lopsided = {1e9, 100e9};
  EXPECT_THROW(split_by_speed(two, lopsided), Error);
}

// The ranks' reports decide the cut: stages on the same machines split by bytes whatever the probes say (their
// differences are noise), stages on different machines by each stage's slowest rank over its share.
TEST(StageSplit, FromTheRanksReportsInTheRuntimesOrder) {
  const std::vector<uint64_t> bytes(12, 100);
  // Four ranks, two a stage: world ranks 0 and 1 are the last stage, 2 and 3 the first.
  const std::vector<uint64_t> one_box = {7, 7, 7, 7};
  const std::vector<double> noisy = {20e9, 14e9, 21e9, 19e9};
  const StageSplit same = split_rank_stages(bytes, one_box, noisy, 2, 2);
  EXPECT_FALSE(same.by_speed);
  EXPECT_EQ(same.counts, (std::vector<int64_t>{6, 6}));
  EXPECT_EQ(same.reason, "by bytes: every stage runs on the same machines");
  EXPECT_TRUE(stages_alike(std::vector<uint64_t>{1, 2, 2, 1}, 2, 2));   // one rank of each machine a stage
  EXPECT_FALSE(stages_alike(std::vector<uint64_t>{1, 1, 0, 0}, 2, 2));  // unknown machines are never alike

  // The first stage (ranks 2, 3) on a machine twice as fast: it gets about twice the layers.
  const std::vector<uint64_t> two_boxes = {1, 1, 2, 2};
  const std::vector<double> rates = {10e9, 10e9, 20e9, 20e9};
  const StageSplit fast_first = split_rank_stages(bytes, two_boxes, rates, 2, 2);
  EXPECT_TRUE(fast_first.by_speed);
  EXPECT_EQ(fast_first.counts, (std::vector<int64_t>{8, 4}));
  // A stage waits for its slowest rank: 20 and 10 GB/s ranks are a 20 GB/s stage (2 x 10), as fast as 10 + 10.
  const std::vector<double> mixed = {10e9, 10e9, 20e9, 10e9};
  EXPECT_EQ(split_rank_stages(bytes, two_boxes, mixed, 2, 2).counts, (std::vector<int64_t>{6, 6}));
  // Shares 2,1: a stage's first rank holds two thirds. The first stage (20 and 10 GB/s) runs at 30 GB/s, the last
  // (10 and 10) at 15, its first rank's two thirds at 10 GB/s: twice the layers for the first.
  const std::vector<double> shares = {2, 1};
  EXPECT_EQ(split_rank_stages(bytes, two_boxes, mixed, 2, 2, shares).counts, (std::vector<int64_t>{8, 4}));
  // Equal machines apart (different ids, alike rates): by bytes, and the reason says how alike.
  const StageSplit alike = split_rank_stages(bytes, two_boxes, std::vector<double>{20e9, 20e9, 21e9, 21e9}, 2, 2);
  EXPECT_FALSE(alike.by_speed);
  EXPECT_EQ(alike.counts, (std::vector<int64_t>{6, 6}));
  EXPECT_NE(alike.reason.find("alike within 10%"), std::string::npos) << alike.reason;
}

// Peers of adjacent stages time one message each way: with 2 ranks a stage, 0 with 2 and 1 with 3; with 3 ranks a
// stage of 4, only 0 with 3 (ranks 1 and 2 have no peer in a next block).
TEST(PointToPointSweep, PeersOfAdjacentBlocksTimeTheSameSizes) {
  for (const int block : {2, 3}) {
    collective::ThreadGroup group(4);
    std::vector<std::vector<collective::SweepPoint>> out(4);
    const std::vector<size_t> bytes = {4, 16384};
    std::vector<std::thread> threads;
    for (int r = 0; r < 4; ++r) {
      threads.emplace_back(
          [&, r] { out[static_cast<size_t>(r)] = collective::sweep_point_to_point(group.rank(r), block, bytes, 3); });
    }
    for (auto& t : threads) t.join();
    for (int r = 0; r < 4; ++r) {
      const auto& points = out[static_cast<size_t>(r)];
      const bool paired = block == 2 || r == 0 || r == 3;
      ASSERT_EQ(points.size(), paired ? 2u : 0u) << "block " << block << " rank " << r;
      for (size_t i = 0; i < points.size(); ++i) {
        EXPECT_EQ(points[i].bytes, bytes[i]);
        EXPECT_GT(points[i].seconds, 0.0);
      }
      EXPECT_EQ(group.rank(r).stats().calls, 0u);  // not the run's traffic
    }
  }
}

}  // namespace
}  // namespace tessera::plan
