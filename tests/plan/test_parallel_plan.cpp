// Tensor and expert parallelism in the planner: the collective model's arithmetic, each rank's share as the runtime
// cuts it (src/model/model_shard.cpp), the cost of a group by hand, and the planner's choice: TP over fast links,
// not over slow ones; ranks of one machine sharing it; TP x PP predicted; the run's own layout under mpirun.
#include <gtest/gtest.h>

#include <thread>

#include "collective/sweep.h"
#include "collective/thread_group.h"
#include "model/quant_mix.h"
#include "model/shard.h"
#include "plan/collective_model.h"
#include "plan/parallel_layout.h"
#include "plan/plan_report.h"
#include "plan/planner.h"
#include "support/plan_fixtures.h"
#include "util/error.h"

namespace tessera::plan {
namespace {

ModelCost shape(const char* name, const char* type = "q4_k_m") {
  return model_cost_from_shape(shape_preset(name).config, quant_mix_from_name(type), GgmlType::F16, name);
}

using test::parted_model;
using test::plan_vm;

Cluster cluster(std::vector<NodeProfile> nodes, double gbit, double rtt_ms) {
  const std::string head = nodes.front().name;
  return Cluster(std::move(nodes), head, {}, LinkProfile{"*", "*", rtt_ms / 1e3, gbit, "test"});
}

PlanOptions options() {
  PlanOptions o;
  o.workload.prompt_tokens = 512;
  o.workload.n_gen = 128;
  o.workload.n_ctx = 4096;
  return o;
}

PlanConstants bare() {
  PlanConstants k;
  k.layer_overhead_s = k.stage_overhead_s = k.message_overhead_s = 0;
  k.expert_read_efficiency = 1;
  return k;
}

TEST(CollectiveModel, RingAllReduceIsLatencyStepsPlusBytesOverBandwidth) {
  // 3 ranks on 10 Gbit/s (1.25 GB/s), 0.2 ms RTT, 40 us per message: 2(3-1) = 4 steps of 0.1 ms + 40 us, and each
  // byte of the buffer crosses 2(3-1)/3 times.
  const CollectiveProfile c = ring_all_reduce(3, 0.2e-3, 1.25e9, 40e-6);
  EXPECT_NEAR(c.latency_s, 560e-6, 1e-12);
  EXPECT_NEAR(c.seconds_per_byte, 4.0 / 3.0 / 1.25e9, 1e-20);
  // Qwen2.5-72B's decode all-reduce: 8192 floats, 32 KiB: 560 us + 34.95 us.
  EXPECT_NEAR(c.all_reduce_s(32768), 560e-6 + 32768 * 4.0 / 3.0 / 1.25e9, 1e-12);
  EXPECT_NEAR(c.all_reduce_s(32768), 594.95e-6, 0.01e-6);
  // A gather sends each byte once, half of what an all-reduce sends.
  EXPECT_NEAR(c.gather_s(65536), c.all_reduce_s(32768), 1e-15);
  EXPECT_NEAR(ring_all_reduce(2, 1e-3, 1e9, 0).latency_s, 1e-3, 1e-15);
  EXPECT_NEAR(ring_all_reduce(2, 1e-3, 1e9, 0).seconds_per_byte, 1e-9, 1e-21);
}

TEST(CollectiveModel, MeasuredSamplesAreInterpolated) {
  const CollectiveProfile c = fit_collectives(2, {{1048576, 1e-3}, {4, 10e-6}, {4096, 20e-6}}, "test");
  ASSERT_TRUE(c.measured());
  EXPECT_NEAR(c.latency_s, 10e-6, 1e-15);
  EXPECT_NEAR(c.all_reduce_s(2), 10e-6, 1e-15);                               // below: the smallest's time
  EXPECT_NEAR(c.all_reduce_s(2050), 15e-6, 1e-12);                            // halfway from 4 B to 4 KiB
  EXPECT_NEAR(c.all_reduce_s(4096 + (1048576 - 4096) / 2.0), 510e-6, 1e-12);  // halfway to 1 MiB
  EXPECT_NEAR(c.all_reduce_s(2 * 1048576.0 - 4096), 1e-3 + 980e-6, 1e-12);    // the last segment's slope
  EXPECT_GT(c.seconds_per_byte, 0.0);
  const std::string text = collectives_text(c);
  EXPECT_NE(text.find("all-reduce 4 B 10 us, 4.0 KiB 20 us, 1.0 MiB 1.00 ms over 2 ranks"), std::string::npos) << text;
}

TEST(ParallelLayout, SharesAreTheRuntimeCuts) {
  const ModelCost m = shape("qwen2.5-72b");
  const ParallelLayout even = parallel_layout(m, ParallelMode::Tensor, 3, {});
  // 8 KV heads (groups of 8 query heads) over 3 ranks by cumulative rounding: 3/2/3, as share_range cuts them.
  EXPECT_NEAR(even.rank[0].kv[0], 3.0 / 8, 1e-12);
  EXPECT_NEAR(even.rank[1].kv[0], 2.0 / 8, 1e-12);
  EXPECT_NEAR(even.rank[2].kv[0], 3.0 / 8, 1e-12);
  EXPECT_NEAR(even.rank[1].q[0], 2.0 / 8, 1e-12);
  for (int r = 0; r < 3; ++r) {
    ShardSpec spec;
    spec.rank = r;
    spec.n_ranks = 3;
    const auto [k0, k1] = share_range(8, spec, "kv");
    EXPECT_NEAR(even.rank[static_cast<size_t>(r)].kv[79], static_cast<double>(k1 - k0) / 8, 1e-12);
  }
  double ffn = 0, vocab = 0;
  for (const auto& r : even.rank) {
    ffn += r.ffn[0];
    vocab += r.vocab;
  }
  EXPECT_NEAR(ffn, 1.0, 1e-12);
  EXPECT_NEAR(vocab, 1.0, 1e-12);
  EXPECT_EQ(even.reduces_per_pass(), 160);  // after attention and after the FFN, in each of 80 layers
  EXPECT_NE(even.cuts.find("KV heads 3/2/3 of 8"), std::string::npos) << even.cuts;
  // --tp-shares 2,1,1: rank 0 takes half of the heads.
  const ParallelLayout uneven = parallel_layout(m, ParallelMode::Tensor, 3, {2, 1, 1});
  EXPECT_NEAR(uneven.rank[0].kv[0], 4.0 / 8, 1e-12);
  EXPECT_NEAR(uneven.rank[1].kv[0], 2.0 / 8, 1e-12);
  EXPECT_NEAR(uneven.rank[2].kv[0], 2.0 / 8, 1e-12);
  EXPECT_NE(uneven.cuts.find("KV heads 4/2/2 of 8"), std::string::npos) << uneven.cuts;
  // A rank that would hold no attention unit: the runtime's error, not a row.
  EXPECT_THROW(parallel_layout(m, ParallelMode::Tensor, 3, {20, 1, 1}), Error);
}

TEST(ParallelLayout, ExpertParallelHoldsWholeExpertsAndReducesOncePerLayer) {
  const ModelCost m = shape("qwen3-30b-a3b");
  const ParallelLayout ep = parallel_layout(m, ParallelMode::Expert, 3, {}, 0.0);
  EXPECT_NEAR(ep.rank[0].experts[0], 43.0 / 128, 1e-12);
  EXPECT_NEAR(ep.rank[1].experts[0], 42.0 / 128, 1e-12);
  EXPECT_NEAR(ep.rank[2].experts[0], 43.0 / 128, 1e-12);
  EXPECT_EQ(ep.rank[1].q[0], 1.0);  // attention whole on every rank
  EXPECT_EQ(ep.reduces_per_pass(), 48);
  EXPECT_NE(ep.cuts.find("experts 43/42/43 of 128"), std::string::npos) << ep.cuts;
  // The busiest rank's picks of a token's 8 experts, over its mean (8 x 43/128): 4.028 / 2.6875.
  EXPECT_NEAR(ep.expert_imbalance, 4.028429 / (8.0 * 43 / 128), 1e-5);
  const ParallelLayout both = parallel_layout(m, ParallelMode::TensorExpert, 3, {});
  EXPECT_EQ(both.reduces_per_pass(), 96);
  EXPECT_NEAR(both.rank[1].kv[0], 2.0 / 4, 1e-12);  // 4 KV heads over 3 ranks: 1/2/1
  EXPECT_THROW(parallel_layout(shape("qwen2.5-7b"), ParallelMode::Expert, 2, {}), Error);
}

// Qwen3-30B-A3B's experts are 3 Q4_K blocks: over 2 ranks each holds 2 of every expert's 3 and runs 1.5 per token.
TEST(ParallelLayout, LeftOverExpertBlocksAreHeldTwiceAndRunOnce) {
  const ParallelLayout tp = parallel_layout(shape("qwen3-30b-a3b"), ParallelMode::Tensor, 2, {});
  for (const RankShare& r : tp.rank) {
    EXPECT_NEAR(r.experts[0], 0.5, 1e-12);
    EXPECT_NEAR(r.experts_held[0], 2.0 / 3, 1e-12);
  }
}

// --ep-redundancy (0.5 by default): a rank holds 1.5x its experts and runs its share; the busiest rank of a
// token's 8 of 128 over 2 ranks does almost exactly 4 (5.06 without copies: 1.26x).
TEST(ParallelLayout, CopiesOfExpertsEvenOutATokensPicks) {
  const ModelCost m = shape("qwen3-30b-a3b");
  const ParallelLayout none = parallel_layout(m, ParallelMode::Expert, 2, {}, 0.0);
  const ParallelLayout half = parallel_layout(m, ParallelMode::Expert, 2, {});
  EXPECT_EQ(half.ep_redundancy, kDefaultEpRedundancy);
  EXPECT_NEAR(none.expert_imbalance, 5.058881 / 4, 1e-5);
  EXPECT_LT(half.expert_imbalance, 1.03);
  EXPECT_GE(half.expert_imbalance, 1.0);
  for (const RankShare& r : half.rank) {
    EXPECT_NEAR(r.experts[0], 0.5, 1e-12);
    EXPECT_NEAR(r.experts_held[0], 0.75, 1e-12);
  }
  EXPECT_NE(half.cuts.find("copies of the next rank's 32/32"), std::string::npos) << half.cuts;
  EXPECT_EQ(parallel_flags(ParallelMode::Expert, 2, 0.0), "--ep 2 --ep-redundancy 0");
  EXPECT_EQ(parallel_flags(ParallelMode::Expert, 2), "--ep 2");
  // The same estimate on every call (a fixed generator), and every copy: nearly even over 3 ranks too.
  const ExpertHolders h(128, ShardSpec{0, 3, {}, false, true, 1.0}, "experts");
  EXPECT_EQ(expected_dealt_imbalance(h, 8), expected_dealt_imbalance(h, 8));
  EXPECT_LT(expected_dealt_imbalance(h, 8), 1.2);
}

TEST(ParallelLayout, BusiestRankOfAToken) {
  EXPECT_NEAR(expected_busiest_picks({64, 64}, 8), 5.058881, 1e-5);  // exact, from the hypergeometric law
  EXPECT_NEAR(expected_busiest_picks({128}, 8), 8.0, 1e-9);
  EXPECT_NEAR(expected_busiest_picks({1, 1, 1}, 1), 1.0, 1e-9);
  EXPECT_NEAR(expected_busiest_picks({4, 4}, 8), 4.0, 1e-9);  // every expert picked: 4 each
}

TEST(CostModel, TensorParallelDecodeIsTheSlowestRankPlusTheCollectives) {
  const ModelCost m = parted_model();
  const Cluster c({plan_vm("a", 20), plan_vm("b", 20)}, "a", {}, LinkProfile{"*", "*", 1e-3, 1e4, "test"});
  const PlanConstants k = bare();
  const CostModel cm(m, c, k);
  const std::vector<size_t> nodes = {0, 1};
  const auto g = cm.make_group(nodes, ParallelMode::Tensor);
  const std::vector<StageSpec> specs{{0, 0, 7, true, true, g}};
  const Prediction p = cm.predict_pipeline(specs, Workload{});
  // Each rank reads half of every part: 8 x 0.5 GB at 20 GB/s x 0.85.
  const double read_s = 4e9 / (20e9 * k.bandwidth_efficiency);
  EXPECT_NEAR(p.decode_parts_1.memory, read_s, 1e-9);
  // 16 all-reduces (2 per layer) and 2 small collectives (the step's broadcast, the candidates' all-gather of the
  // CLI's default sampler, top-k 40), each 2(2-1) x RTT/2 = 1 ms of latency.
  EXPECT_NEAR(p.decode_parts_1.latency, 18e-3, 1e-9);
  const double spb = 1.0 / (1e4 * 1e9 / 8);  // 2(2-1)/2 = 1 crossing per byte
  // The broadcast: its header, one token's ids, one SampleSpec; the all-gather: 2 ranks' best, draw and 40
  // candidates, each byte crossing once (half an all-reduce of them all).
  const double step = k.step_header_bytes + k.wire_bytes_per_token_id + k.sample_spec_bytes;
  const double bytes = 16 * 4096 * 4.0 + step + 2 * (16 + 8 * 40) / 2.0;
  EXPECT_NEAR(p.decode_parts_1.bandwidth, bytes * spb, 1e-12);
  EXPECT_NEAR(1.0 / p.decode_tps_1, read_s + 18e-3 + bytes * spb, 1e-9);
  const GroupPass pass = cm.group_pass(specs[0], 1, 1, 0, 1);
  EXPECT_EQ(pass.all_reduces, 16);
  EXPECT_EQ(pass.other_collectives, 2);
  ASSERT_EQ(pass.small.size(), 2u);
  EXPECT_EQ(pass.small[0].what, "the step's broadcast");
  EXPECT_EQ(pass.small[1].what, "the candidates' all-gather (top-k 40)");
  // A stage that samples nothing (the first of TP x PP) makes only the broadcast.
  EXPECT_EQ(cm.group_pass(StageSpec{0, 0, 7, true, false, g}, 1, 1, 0, 0).other_collectives, 1);
  EXPECT_NEAR(pass.ranks[1].bytes, 4e9, 1);
}

TEST(CostModel, SmallCollectivesFollowTheSampler) {
  const PlanConstants k;
  const auto count = [](const std::vector<SmallCollective>& v) {
    int n = 0;
    for (const auto& c : v) n += c.count;
    return n;
  };
  SamplerParams greedy;
  greedy.temperature = 0.0f;
  // Greedy over 3 ranks, 2 rows: the broadcast, then each rank's best and draw (16 B a row).
  const auto g = small_collectives(greedy, 3, 32000, 2, 2, k);
  ASSERT_EQ(g.size(), 2u);
  EXPECT_FALSE(g[0].all_gather);
  EXPECT_NEAR(g[0].bytes, k.step_header_bytes + 2 * k.wire_bytes_per_token_id + 2 * k.sample_spec_bytes, 1e-9);
  EXPECT_TRUE(g[1].all_gather);
  EXPECT_NEAR(g[1].bytes, 2 * 16.0, 1e-9);
  // The CLI's default (top-k 40): the same two, the all-gather with 40 candidates a row.
  const auto d = small_collectives(SamplerParams{}, 3, 32000, 1, 1, k);
  EXPECT_EQ(count(d), 2);
  EXPECT_NEAR(d[1].bytes, 16.0 + 8 * 40, 1e-9);
  // Top-p without top-k: + NucleusCut's rounds, a broadcast per rank, the draw's all-gather.
  SamplerParams nucleus;
  nucleus.top_k = 0;
  EXPECT_EQ(count(small_collectives(nucleus, 3, 32000, 1, 1, k)), 2 + k.nucleus_rounds + 3 + 1);
  // Top-k as large as the vocabulary draws over all of it, without top-p's rounds.
  SamplerParams whole;
  whole.top_k = 32000;
  whole.top_p = 1.0f;
  EXPECT_EQ(count(small_collectives(whole, 4, 32000, 1, 1, k)), 2 + 4 + 1);
  // A stage that samples nothing: the broadcast only.
  EXPECT_EQ(count(small_collectives(SamplerParams{}, 3, 32000, 1, 0, k)), 1);
}

TEST(CostModel, ThreeRanksWaitForTheOneWithTheMostHeads) {
  const ModelCost m = parted_model();
  const Cluster c({plan_vm("a", 20), plan_vm("b", 20), plan_vm("c", 20)}, "a", {},
                  LinkProfile{"*", "*", 1e-3, 1e4, "test"});
  const PlanConstants k = bare();
  const CostModel cm(m, c, k);
  const std::vector<size_t> nodes = {0, 1, 2};
  const StageSpec s{0, 0, 7, true, true, cm.make_group(nodes, ParallelMode::Tensor)};
  const GroupPass pass = cm.group_pass(s, 1, 1, 0, 0);
  // 8 KV heads: 3/2/3; FFN 14336 rows: 4779/4778/4779.
  const double layer0 = 0.3e9 * 3 / 8 + 0.1e9 * 3 / 8 + 0.6e9 * 4779 / 14336;
  const double layer1 = 0.3e9 * 2 / 8 + 0.1e9 * 2 / 8 + 0.6e9 * 4778 / 14336;
  EXPECT_NEAR(pass.ranks[0].bytes, 8 * layer0, 1);
  EXPECT_NEAR(pass.ranks[1].bytes, 8 * layer1, 1);
  EXPECT_NE(pass.slowest, 1u);
  EXPECT_NEAR(pass.ranks[pass.slowest].t.memory, 8 * layer0 / (20e9 * k.bandwidth_efficiency), 1e-9);
  // 4 steps of RTT/2 per all-reduce over 3 ranks; no logits, so only the step's broadcast besides.
  EXPECT_NEAR(pass.collectives.latency, (16 + 1) * 4 * 0.5e-3, 1e-9);
}

TEST(CostModel, RanksOfOneMachineShareItsBandwidthAndMemory) {
  const ModelCost m = shape("qwen2.5-7b");
  NodeProfile a = plan_vm("rank0", 20), b = plan_vm("rank1", 20);
  a.machine = b.machine = "box";
  a.cpus = {0};
  b.cpus = {1};
  a.threads = b.threads = 1;
  const Cluster c({a, b}, "rank0", {}, LinkProfile{"*", "*", 1e-5, 100, "test"});
  const CostModel cm(m, c, PlanConstants{});
  const std::vector<size_t> nodes = {0, 1};
  const StageSpec tp{0, 0, m.n_layer() - 1, true, true, cm.make_group(nodes, ParallelMode::Tensor)};
  const StageSpec alone{0, 0, m.n_layer() - 1, true, true};
  // Half the bytes each at half the machine's bandwidth: no faster than one process.
  const GroupPass pass = cm.group_pass(tp, 1, 1, 512, 1);
  const TimeParts local = cm.stage_time(alone, 1, 1, 512, 1);
  EXPECT_NEAR(pass.ranks[0].t.memory, local.memory, 0.1 * local.memory);
  EXPECT_GE(pass.total.total(), local.total() * 0.9);
  const auto mem = cm.group_memory(tp, Workload{});
  EXPECT_NEAR(static_cast<double>(mem[1].available), 0.5 * 60e9 * 0.95, 1e6);
}

// A node's measured matmul ramp (probe: the rate by tokens per pass) replaces the constants' ramp for its quantized
// matmuls: log-linear between the measured counts, its largest count's rate above it; not for --repack's tiles.
TEST(CostModel, AMeasuredBatchRampReplacesTheConstants) {
  const ModelCost m = shape("qwen2.5-7b");
  const PlanConstants k;
  NodeProfile a = plan_vm("a", 20);
  NodeProfile b = a;
  b.name = "b";
  b.batch_rates = {{8, 0.5}, {16, 0.8}, {64, 0.9}, {256, 1.0}};
  NodeProfile c = b;
  c.name = "c";
  c.repack = true;
  NodeProfile d = c;  // --repack without a ramp
  d.name = "d";
  d.batch_rates.clear();
  const Cluster cluster({a, b, c, d}, "a", {}, LinkProfile{"*", "*", 1e-5, 100, "test"});
  const CostModel cm(m, cluster, k);
  const double full = a.int8_gops * 1e9 * k.int8_efficiency;
  EXPECT_NEAR(cm.compute_rate(1, true, 16), 0.8 * full, 1);
  EXPECT_NEAR(cm.compute_rate(1, true, 32), (0.8 + 0.1 * 0.5) * full, 1);  // halfway between 16 and 64 in log
  EXPECT_NEAR(cm.compute_rate(1, true, 512), full, 1);
  EXPECT_NEAR(cm.compute_rate(1, true, 8), 0.5 * full, 1);
  // Below the smallest count: from the few-token constant (or the measured rate, if lower) at 2 tokens.
  EXPECT_NEAR(cm.compute_rate(1, true, 2), std::min(k.few_token_compute_factor, 0.5) * full, 1);
  // The constants' ramp where nothing was measured, for F32 work and on a --repack node.
  EXPECT_NEAR(cm.compute_rate(2, true, 16), cm.compute_rate(3, true, 16), 1);
  EXPECT_NEAR(cm.compute_rate(1, false, 16), cm.compute_rate(0, false, 16), 1);
  EXPECT_LT(cm.compute_rate(0, true, 16), 0.8 * full);
}

// With the machine's own read rate known (a reader on each CPU): ranks get their share of it, never more than their
// own rate, in proportion to their threads.
TEST(CostModel, RanksOfOneMachineShareTheMachinesMeasuredRate) {
  const ModelCost m = shape("qwen2.5-7b");
  const PlanConstants k;
  const auto rates = [&](double machine_gbps, int threads_a, int threads_b) {
    NodeProfile a = plan_vm("rank0", 20), b = plan_vm("rank1", 20);
    a.machine = b.machine = "box";
    a.machine_read_gbps = b.machine_read_gbps = machine_gbps;
    a.threads = threads_a;
    b.threads = threads_b;
    const Cluster c({a, b}, "rank0", {}, LinkProfile{"*", "*", 1e-5, 100, "test"});
    const CostModel cm(m, c, k);
    const std::vector<size_t> nodes = {0, 1};
    const auto g = cm.make_group(nodes, ParallelMode::Tensor);
    return std::pair{cm.rank_read_rate(*g, 0), cm.rank_read_rate(*g, 1)};
  };
  const double own = 20e9 * k.bandwidth_efficiency;
  // Each core reads at its own full rate (a machine of 40 GB/s): nothing is divided.
  EXPECT_NEAR(rates(40, 1, 1).first, own, 1);
  EXPECT_NEAR(rates(40, 1, 1).second, own, 1);
  // One memory channel both ranks wait for (the machine reads no faster than one rank): half each.
  EXPECT_NEAR(rates(20, 1, 1).first, own / 2, 1);
  // 30 GB/s over 3 threads: 1/3 to the one-thread rank, 2/3 to the other (capped at its own 20).
  EXPECT_NEAR(rates(30, 1, 2).first, 10e9 * k.bandwidth_efficiency, 1);
  EXPECT_NEAR(rates(30, 1, 2).second, own, 1);
  // Not measured: the rank's own rate divided by the ranks on the machine, as before.
  EXPECT_NEAR(rates(0, 1, 1).first, own / 2, 1);
}

TEST(Planner, ChoosesTensorParallelOverFastLinksAndNotOverSlowOnes) {
  const ModelCost m = shape("qwen2.5-72b");
  const Plan fast = make_plan(m, cluster({plan_vm("vm1"), plan_vm("vm2"), plan_vm("vm3")}, 100, 0.05), options());
  ASSERT_TRUE(fast.chosen);
  const Strategy& f = fast.strategies[*fast.chosen];
  EXPECT_EQ(f.kind, StrategyKind::TensorParallel) << fast.decision;
  EXPECT_EQ(f.nodes.size(), 3u);
  EXPECT_GT(f.pred.decode_tps_1, 2.0 * fast.strategies.front().pred.decode_tps_1);
  EXPECT_EQ(fast.decision.rfind("Tensor parallel x3 over vm1, vm2, vm3 predicts", 0), 0u) << fast.decision;
  ASSERT_FALSE(f.arithmetic.empty());

  // 1 Gbit/s and 10 ms RTT: 160 all-reduces x 4 x 5 ms per token is far more than the reads TP saves.
  const Plan slow = make_plan(m, cluster({plan_vm("vm1"), plan_vm("vm2"), plan_vm("vm3")}, 1, 10), options());
  ASSERT_TRUE(slow.chosen);
  EXPECT_FALSE(slow.strategies[*slow.chosen].is_parallel()) << slow.decision;
  bool shown = false;
  for (const auto& s : slow.strategies) {
    if (s.kind != StrategyKind::TensorParallel) continue;
    shown = true;
    EXPECT_LT(s.pred.decode_tps_1, slow.strategies.front().pred.decode_tps_1) << s.name;
    EXPECT_EQ(s.pred.bottleneck, Bottleneck::LinkLatency) << s.name;
  }
  EXPECT_TRUE(shown);
}

TEST(Planner, TensorGroupsAsPipelineStagesArePredictedNotRun) {
  const ModelCost m = shape("qwen2.5-72b");
  const Plan p = make_plan(m, cluster({plan_vm("a"), plan_vm("b"), plan_vm("c"), plan_vm("d")}, 100, 0.05), options());
  const Strategy* tpp = nullptr;
  for (const auto& s : p.strategies) {
    if (s.kind == StrategyKind::TensorPipeline) tpp = &s;
  }
  ASSERT_NE(tpp, nullptr);
  EXPECT_EQ(tpp->name, "tensor x2 pipeline x2");
  EXPECT_FALSE(tpp->runnable);
  EXPECT_TRUE(tpp->feasible);
  ASSERT_EQ(tpp->parallel.size(), 2u);
  EXPECT_EQ(tpp->parallel[0].last + 1, tpp->parallel[1].first);
  EXPECT_EQ(tpp->parallel[1].last, 79);
  EXPECT_GT(tpp->pred.decode_tps_1, p.strategies.front().pred.decode_tps_1);
  ASSERT_TRUE(p.chosen);
  EXPECT_NE(p.strategies[*p.chosen].kind, StrategyKind::TensorPipeline);
}

TEST(Planner, UnderMpiTheRunsLayoutIsTheRowThatRuns) {
  const ModelCost m = shape("qwen3-30b-a3b");
  Cluster c = cluster({plan_vm("rank0"), plan_vm("rank1")}, 100, 0.01);
  c.set_collectives(fit_collectives(2, {{4, 20e-6}, {32768, 40e-6}, {4194304, 3e-3}}, "measured"));
  PlanOptions o = options();
  o.mpi_ranks = true;
  o.run = PlanOptions::ParallelRun{ParallelMode::Expert, {}};
  const Plan p = make_plan(m, c, o);
  ASSERT_GE(p.strategies.size(), 2u);
  EXPECT_EQ(p.strategies.front().kind, StrategyKind::Local);
  const Strategy& mine = p.strategies.back();
  EXPECT_EQ(mine.name, "your --ep 2");
  EXPECT_EQ(mine.kind, StrategyKind::ExpertParallel);
  ASSERT_TRUE(p.chosen);
  EXPECT_EQ(*p.chosen, p.strategies.size() - 1);
  ASSERT_TRUE(mine.parallel.front().collectives.measured());
  // 48 all-reduces of 8 KiB, each between the 4 B and 32 KiB samples.
  EXPECT_NEAR(mine.parallel.front().decode.all_reduce_s, 20e-6 + (8192 - 4) * 20e-6 / (32768 - 4), 1e-12);
  EXPECT_EQ(p.decision.rfind("Your --ep 2 run predicts", 0), 0u) << p.decision;
  for (const auto& s : p.strategies) EXPECT_NE(s.kind, StrategyKind::Pipeline);  // ranks are not workers
  const std::string text = plan_text(p, m, c);
  EXPECT_NE(text.find("collectives: all-reduce 4 B 20 us"), std::string::npos) << text;
  EXPECT_NE(text.find("between the sizes measured at start"), std::string::npos) << text;
}

TEST(CollectiveSweep, EveryRankTimesTheSameSizesAndTheStatsStayTheRuns) {
  collective::ThreadGroup group(2);
  std::vector<std::vector<collective::SweepPoint>> out(2);
  const std::vector<size_t> floats = {1, 1024};
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back(
        [&, r] { out[static_cast<size_t>(r)] = collective::sweep_all_reduce(group.rank(r), floats, 3); });
  }
  for (auto& t : threads) t.join();
  for (const auto& points : out) {
    ASSERT_EQ(points.size(), 2u);
    EXPECT_EQ(points[0].bytes, 4u);
    EXPECT_EQ(points[1].bytes, 4096u);
    EXPECT_GT(points[0].seconds, 0.0);
    EXPECT_GT(points[1].seconds, 0.0);
  }
  EXPECT_EQ(group.rank(0).stats().calls, 0u);
  EXPECT_EQ(group.rank(1).stats().bytes, 0u);
}

}  // namespace
}  // namespace tessera::plan
