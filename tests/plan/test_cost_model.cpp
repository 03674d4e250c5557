// The cost model's equations on hand-made models and nodes, where each prediction can be computed by hand: roofline
// per stage, RTT/2 + bytes/bandwidth per hop, the pipelined prefill makespan, concurrency across stages, MoE reads.
#include <gtest/gtest.h>

#include <cmath>

#include "plan/cost_model.h"

namespace tessera::plan {
namespace {

// Dense layers of 1 GB and 2 GFLOP per token on quantized weights; no embedding, head or KV unless a test adds them.
ModelCost flat_model(int64_t n_layer, uint64_t layer_bytes = 1000000000, double flops = 2e9) {
  ModelCost m;
  m.label = "flat";
  m.matmul_type = "q4_K";
  m.config.n_layer = n_layer;
  m.config.n_embd = 4096;
  m.config.n_head = 32;
  m.config.n_head_kv = 8;
  m.config.head_dim = m.config.head_dim_v = 128;
  m.config.n_ff = 14336;
  m.config.n_vocab = 1000;
  m.config.n_ctx_train = 8192;
  for (int64_t i = 0; i < n_layer; ++i) {
    LayerCost l;
    l.weight_bytes = l.dense_bytes = layer_bytes;
    l.dense_flops_q = flops;
    m.layers.push_back(l);
  }
  return m;
}

NodeProfile node(const std::string& name, double gbps, double int8_gops = 1e6, uint64_t mem = uint64_t{100} << 30) {
  NodeProfile n;
  n.name = name;
  n.mem_available_bytes = mem;
  n.mem_read_gbps = gbps;
  n.int8_gops = int8_gops;
  n.f32_gflops = int8_gops;
  return n;
}

// No fixed overheads, so times are the roofline terms alone.
PlanConstants bare() {
  PlanConstants k;
  k.layer_overhead_s = k.stage_overhead_s = k.message_overhead_s = 0;
  k.expert_read_efficiency = 1;
  return k;
}

Workload work(int64_t prompt = 512, int64_t concurrency = 1) {
  Workload w;
  w.prompt_tokens = prompt;
  w.n_gen = 64;
  w.concurrency = concurrency;
  w.n_ctx = 4096;
  return w;
}

LinkProfile link_of(double gbit, double rtt_s) { return LinkProfile{"*", "*", rtt_s, gbit, "test"}; }

TEST(CostModel, LocalDecodeIsBytesOverBandwidth) {
  const ModelCost m = flat_model(8);
  const Cluster c({node("local", 20)}, "local");
  const PlanConstants k = bare();
  const CostModel cm(m, c, k);
  const StageSpec s{0, 0, 7, true, true};
  const Prediction p = cm.predict_pipeline(std::span(&s, 1), work());
  const double expected_s = 8e9 / (20e9 * k.bandwidth_efficiency);
  EXPECT_NEAR(1.0 / p.decode_tps_1, expected_s, 1e-9);
  EXPECT_EQ(p.decode_parts_1.dominant(), Bottleneck::MemoryBandwidth);
  EXPECT_NEAR(p.decode_parts_1.memory, expected_s, 1e-9);
}

TEST(CostModel, LocalPrefillIsFlopsOverCompute) {
  const ModelCost m = flat_model(8, 1000, 2e9);  // weights of a few bytes: compute-bound
  const Cluster c({node("local", 20, 1000)}, "local");
  const PlanConstants k = bare();
  const CostModel cm(m, c, k);
  const StageSpec s{0, 0, 7, true, true};
  const Prediction p = cm.predict_pipeline(std::span(&s, 1), work(512));
  const double expected_s = 512 * 8 * 2e9 / (1000e9 * k.int8_efficiency);
  EXPECT_NEAR(p.prefill_s, expected_s, 1e-6 * expected_s);
  EXPECT_NEAR(p.prefill_tps, 512 / expected_s, 1e-6 * 512 / expected_s);
  EXPECT_EQ(p.prefill_parts.dominant(), Bottleneck::Compute);
  EXPECT_EQ(p.micro_batch, 512);
}

TEST(CostModel, HopIsHalfRttPlusTransferPlusOverhead) {
  const ModelCost m = flat_model(2);
  const Cluster c({node("a", 10), node("b", 10)}, "a", {}, link_of(8, 0.002));  // 8 Gbit/s = 1e9 bytes/s
  PlanConstants k;
  k.message_overhead_s = 50e-6;
  const CostModel cm(m, c, k);
  const TimeParts t = cm.hop_time(0, 1, 1e6);
  EXPECT_NEAR(t.latency, 0.001 + 50e-6, 1e-12);
  EXPECT_NEAR(t.bandwidth, 1e-3, 1e-12);
  EXPECT_EQ(cm.hop_time(1, 1, 1e6).total(), 0.0);
}

TEST(CostModel, PipelineDecodeOfOneStreamAddsHopsToTheSum) {
  const ModelCost m = flat_model(8);
  const double rtt = 0.010;
  const Cluster c({node("a", 20), node("b", 20)}, "a", {}, link_of(100, rtt));
  const PlanConstants k = bare();
  const CostModel cm(m, c, k);
  const StageSpec local{0, 0, 7, true, true};
  const std::vector<StageSpec> pipe = {{0, 0, 3, true, false}, {1, 4, 7, false, true}};
  const Prediction one = cm.predict_pipeline(std::span(&local, 1), work());
  const Prediction two = cm.predict_pipeline(pipe, work());
  // Same bytes read one stage after the other, plus a -> b (activations) and b -> a (the sampled token).
  const double act = 4096 * 2.0, id = k.wire_bytes_per_token_id;
  const double hops = rtt + (act + id) / (100e9 / 8);
  EXPECT_NEAR(1.0 / two.decode_tps_1, 1.0 / one.decode_tps_1 + hops, 1e-9);
  EXPECT_LT(two.decode_tps_1, one.decode_tps_1);
}

TEST(CostModel, PipelinedPrefillIsMicroBatchesPlusStagesMinusOneTimesTheSlowest) {
  // Compute-bound equal stages on an instant link: makespan(m) = (P/m + S - 1) t(m) with t(m) = m f / rate,
  // i.e. (P + (S-1) m) f / rate, smallest at the smallest micro-batch the planner tries.
  const ModelCost m = flat_model(8, 1000, 2e9);
  const Cluster c({node("a", 20, 1000), node("b", 20, 1000)}, "a", {}, link_of(1e4, 0));
  PlanConstants k = bare();
  k.small_batch_compute_factor = 1.0;  // the same rate at every batch size
  const CostModel cm(m, c, k);
  const std::vector<StageSpec> pipe = {{0, 0, 3, true, false}, {1, 4, 7, false, true}};
  const Prediction p = cm.predict_pipeline(pipe, work(512));
  const double stage_flops_per_token = 4 * 2e9, rate = 1000e9 * k.int8_efficiency;
  const int64_t m0 = PlanConstants::kMicroBatches[0];
  const double expected =
      (512.0 / static_cast<double>(m0) + 2 - 1) * static_cast<double>(m0) * stage_flops_per_token / rate;
  EXPECT_EQ(p.micro_batch, m0);
  EXPECT_NEAR(p.prefill_s, expected, 1e-3 * expected);
  // Local does the same work on one node: about twice as long.
  const StageSpec local{0, 0, 7, true, true};
  const Prediction l = cm.predict_pipeline(std::span(&local, 1), work(512));
  EXPECT_NEAR(l.prefill_s / p.prefill_s, 2.0 * 512 / (512 + static_cast<double>(m0)), 1e-3);
}

// The runtime's automatic rule (PipelineExecutor::prompt_chunks) halves the first and last micro-batch. Over two
// equal compute-bound stages that buys nothing: once a full micro-batch has entered, the second stage trails the
// first by one, so the makespan is the whole prompt plus m either way, not plus m/2. In front of a slower stage the
// halved first one does pay: the bottleneck starts sooner.
TEST(CostModel, HalvedFirstAndLastMicroBatchesShortenFillAndDrainOnlyAroundABottleneck) {
  const ModelCost m = flat_model(8, 1000, 2e9);
  const Cluster c({node("a", 20, 1000), node("b", 20, 1000)}, "a", {}, link_of(1e4, 0));
  PlanConstants k = bare();
  k.small_batch_compute_factor = 1.0;
  const CostModel cm(m, c, k);
  const std::vector<StageSpec> pipe = {{0, 0, 3, true, false}, {1, 4, 7, false, true}};
  Workload even = work(512);
  even.micro_batch = 64;
  Workload halved = even;
  halved.end_batch = 32;
  const double per_token = 4 * 2e9 / (1000e9 * k.int8_efficiency);  // one stage's compute time per token
  const Prediction e = cm.predict_pipeline(pipe, even);
  const Prediction h = cm.predict_pipeline(pipe, halved);
  EXPECT_NEAR(e.prefill_s, (512 + 64) * per_token, 1e-3 * e.prefill_s);  // 8 turns + 1 to fill
  // The first 64 waits for a's second micro-batch, then b trails a by 64 to the end.
  EXPECT_NEAR(h.prefill_s, (512 + 64) * per_token, 1e-3 * h.prefill_s);
  EXPECT_EQ(h.micro_batch, 64);
  // Stage b holds 6 of the 8 layers: the first micro-batch crosses a (2 layers), then b computes everything.
  const std::vector<StageSpec> lopsided = {{0, 0, 1, true, false}, {1, 2, 7, false, true}};
  const double layer = per_token / 4;
  const Prediction le = cm.predict_pipeline(lopsided, even);
  const Prediction lh = cm.predict_pipeline(lopsided, halved);
  EXPECT_NEAR(le.prefill_s, (2 * 64 + 6 * 512) * layer, 1e-3 * le.prefill_s);
  EXPECT_NEAR(lh.prefill_s, (2 * 32 + 6 * 512) * layer, 1e-3 * lh.prefill_s);
}

TEST(CostModel, FewTokensRunAtTheSmallBatchRate) {
  // Compute-bound: one token at small_batch_compute_factor of the full rate, 2-8 tokens (the small-batch kernels)
  // at few_token_compute_factor, the full rate from full_rate_batch up, logarithmic in the batch in between.
  const ModelCost m = flat_model(8, 1000, 2e9);
  const Cluster c({node("a", 1e5, 100)}, "a", {}, link_of(1e4, 0));
  PlanConstants k = bare();
  k.small_batch_compute_factor = 0.2;
  k.few_token_compute_factor = 0.5;
  k.few_token_batch = 8;
  k.full_rate_batch = 128;
  const CostModel cm(m, c, k);
  const StageSpec local{0, 0, 7, true, true};
  const double full = 100e9 * k.int8_efficiency, flops = 8 * 2e9;
  const Prediction one = cm.predict_pipeline(std::span(&local, 1), work(512, 1));
  EXPECT_NEAR(one.decode_tps_1, 0.2 * full / flops, 1e-3 * one.decode_tps_1);
  const Prediction four = cm.predict_pipeline(std::span(&local, 1), work(512, 4));
  EXPECT_NEAR(four.decode_tps_c, 0.5 * full / flops, 1e-3 * four.decode_tps_c);
  // 32 tokens: two of the four doublings from 8 to 128; 16 tokens: one.
  const Prediction many = cm.predict_pipeline(std::span(&local, 1), work(512, 32));
  EXPECT_NEAR(many.decode_tps_c, 0.75 * full / flops, 1e-3 * many.decode_tps_c);
  const Prediction some = cm.predict_pipeline(std::span(&local, 1), work(512, 16));
  EXPECT_NEAR(some.decode_tps_c, 0.625 * full / flops, 1e-3 * some.decode_tps_c);
  const Prediction wide = cm.predict_pipeline(std::span(&local, 1), work(512, 128));
  EXPECT_NEAR(wide.decode_tps_c, full / flops, 1e-3 * wide.decode_tps_c);
}

TEST(CostModel, PackedWeightsReachTheFullRateAtSmallerBatches) {
  // --repack builds the prefill tiles once at load: a packed node computes at the full rate from
  // full_rate_batch_packed tokens, an unpacked one only from full_rate_batch; both start from the few-token rate.
  const ModelCost m = flat_model(8, 1000, 2e9);
  PlanConstants k = bare();
  k.few_token_compute_factor = 0.5;
  k.few_token_batch = 8;
  k.full_rate_batch = 512;
  k.full_rate_batch_packed = 32;
  NodeProfile packed = node("a", 1e5, 100);
  packed.repack = true;
  const Cluster plain({node("a", 1e5, 100)}, "a", {}, link_of(1e4, 0));
  const Cluster repacked({packed}, "a", {}, link_of(1e4, 0));
  const StageSpec s{0, 0, 7, false, false};
  const double full_s = 32 * 8 * 2e9 / (100e9 * k.int8_efficiency);
  // 32 tokens: packed at the full rate; unpacked two of the six doublings from 8 to 512.
  EXPECT_NEAR(CostModel(m, repacked, k).stage_time(s, 32, 1, 0, 0).compute, full_s, 1e-9);
  EXPECT_NEAR(CostModel(m, plain, k).stage_time(s, 32, 1, 0, 0).compute, full_s / (0.5 + 0.5 * 2.0 / 6.0), 1e-9);
  // One token is the same on both.
  EXPECT_NEAR(CostModel(m, repacked, k).stage_time(s, 1, 1, 0, 0).compute,
              CostModel(m, plain, k).stage_time(s, 1, 1, 0, 0).compute, 1e-12);
}

TEST(CostModel, ExpertMatmulsRunAtTheBatchRoutedToThem) {
  // 8 experts, 2 per token: 64 tokens touch all 8 (almost surely), each expert sees 64 * 2 / 8 = 16 of them, which
  // run at the 16-token rate while the dense part runs at the 64-token rate.
  ModelCost m = flat_model(1, 0, 1e9);
  m.config.n_expert = 8;
  m.config.n_expert_used = 2;
  m.layers[0].expert_flops_q = 3e9;
  PlanConstants k = bare();
  k.few_token_compute_factor = 0.5;
  k.few_token_batch = 8;
  k.full_rate_batch = 128;
  const Cluster c({node("a", 1e5, 100)}, "a", {}, link_of(1e4, 0));
  const CostModel cm(m, c, k);
  const StageSpec s{0, 0, 0, false, false};
  const double rate = 100e9 * k.int8_efficiency;
  const double distinct = 8 * (1 - std::pow(0.75, 64));
  const double per_expert = 64 * 2 / distinct;
  const double f_dense = 0.5 + 0.5 * std::log(64.0 / 8) / std::log(128.0 / 8);
  const double f_expert = 0.5 + 0.5 * std::log(per_expert / 8) / std::log(128.0 / 8);
  EXPECT_NEAR(cm.stage_time(s, 64, 1, 0, 0).compute, 64 * 1e9 / (rate * f_dense) + 64 * 2 * 3e9 / (rate * f_expert),
              1e-9);
}

TEST(CostModel, ConcurrencyKeepsPipelineStagesBusy) {
  // Compute-bound decode: batching does not help one node, but two groups of sequences keep both stages busy.
  const ModelCost m = flat_model(8, 1000, 2e9);
  const Cluster c({node("a", 20, 100), node("b", 20, 100)}, "a", {}, link_of(1e4, 0));
  PlanConstants k = bare();
  k.small_batch_compute_factor = 1.0;
  const CostModel cm(m, c, k);
  const std::vector<StageSpec> pipe = {{0, 0, 3, true, false}, {1, 4, 7, false, true}};
  const Prediction p = cm.predict_pipeline(pipe, work(512, 2));
  // The runtime keeps a step in flight per stage, so both stages stay busy all the time: twice one stream (a
  // synchronous step would give 4/3: the ring once plus the busiest stage once more for two tokens).
  EXPECT_EQ(p.decode_groups, 2);
  EXPECT_NEAR(p.decode_tps_c, 2.0 * p.decode_tps_1, 1e-3 * p.decode_tps_c);
  const StageSpec local{0, 0, 7, true, true};
  const Prediction l = cm.predict_pipeline(std::span(&local, 1), work(512, 2));
  EXPECT_NEAR(l.decode_tps_c, l.decode_tps_1, 1e-3 * l.decode_tps_c);
  EXPECT_EQ(l.decode_parts_c.dominant(), Bottleneck::Compute);
}

TEST(CostModel, BatchedDecodeOfAMemoryBoundNodeReadsWeightsOnce) {
  const ModelCost m = flat_model(8);
  const Cluster c({node("a", 20)}, "a");
  const CostModel cm(m, c, bare());
  const StageSpec local{0, 0, 7, true, true};
  const Prediction l = cm.predict_pipeline(std::span(&local, 1), work(512, 4));
  EXPECT_NEAR(l.decode_tps_c, 4.0 * l.decode_tps_1, 1e-3 * l.decode_tps_c);
}

TEST(CostModel, MoEReadsTheExpertsABatchTouches) {
  ModelCost m = flat_model(1, 0, 0);
  m.config.n_expert = 8;
  m.config.n_expert_used = 2;
  m.layers[0].dense_bytes = 1000000;
  m.layers[0].expert_bytes = 8000000;  // 1 MB per expert
  m.layers[0].weight_bytes = 9000000;
  const Cluster c({node("a", 1)}, "a");
  const PlanConstants k = bare();
  const CostModel cm(m, c, k);
  const StageSpec s{0, 0, 0, false, false};
  const double rate = 1e9 * k.bandwidth_efficiency;
  EXPECT_NEAR(cm.stage_time(s, 1, 1, 0, 0).memory, (1e6 + 2e6) / rate, 1e-12);
  // Three tokens: 8 (1 - (6/8)^3) distinct experts on average.
  EXPECT_NEAR(cm.stage_time(s, 3, 3, 0, 0).memory, (1e6 + 8e6 * (1 - 0.421875)) / rate, 1e-12);
  EXPECT_EQ(m.decode_bytes_per_token(), 3000000u);
}

TEST(CostModel, RoutedExpertsStreamAtTheirOwnRate) {
  // 2 MoE layers of 8 experts of 1 MB, 2 a token, beside 1 MB of dense weights a layer and a dense layer: one token
  // reads 3 MB dense and 2 x 2 MB of experts, three tokens 2 x 8 (1 - (6/8)^3) MB of experts; the experts' bytes at
  // expert_read_efficiency of the rate, the rest at the full rate.
  ModelCost m = flat_model(3, 1000000, 0);
  m.config.n_expert = 8;
  m.config.n_expert_used = 2;
  for (int i = 0; i < 2; ++i) m.layers[static_cast<size_t>(i)].expert_bytes = 8000000;
  const Cluster c({node("a", 1)}, "a");
  PlanConstants k = bare();
  k.expert_read_efficiency = 0.5;
  const CostModel cm(m, c, k);
  const StageSpec s{0, 0, 2, false, false};
  const double rate = 1e9 * k.bandwidth_efficiency;
  EXPECT_NEAR(cm.stage_time(s, 1, 1, 0, 0).memory, 3e6 / rate + 4e6 / (rate * 0.5), 1e-12);
  const double touched3 = 2 * 8e6 * (1 - 0.421875);
  EXPECT_NEAR(cm.stage_time(s, 3, 3, 0, 0).memory, 3e6 / rate + touched3 / (rate * 0.5), 1e-12);
  // At efficiency 1 the experts are bytes like any other.
  EXPECT_NEAR(CostModel(m, c, bare()).stage_time(s, 1, 1, 0, 0).memory, 7e6 / rate, 1e-12);
}

TEST(CostModel, MemoryPerStage) {
  ModelCost m = flat_model(4, 1000);
  m.layers[2].kv_bytes_per_token = 10;
  m.embd_bytes = 5000;
  m.output_bytes = 7;
  m.config.tied_output = true;
  const Cluster c({node("a", 1, 1, 1 << 30), node("b", 1, 1, 1 << 30)}, "a", {}, link_of(1, 0));
  PlanConstants k;
  const CostModel cm(m, c, k);
  Workload w = work(16, 3);
  w.n_ctx = 100;
  const MemoryNeed first = cm.stage_memory({0, 0, 1, true, false}, w);
  const MemoryNeed last = cm.stage_memory({1, 2, 3, false, true}, w);
  EXPECT_EQ(first.weights, 2000u + 5000u);
  EXPECT_EQ(first.kv_cache, 0u);
  // A tied head needs its own copy of token_embd on the last stage.
  EXPECT_EQ(last.weights, 2000u + 7u + 5000u);
  EXPECT_EQ(last.kv_cache, 10u * 100u * 3u);
  EXPECT_EQ(last.available, static_cast<uint64_t>((1 << 30) * (1.0 - k.memory_headroom)));
  EXPECT_GE(last.buffers, k.node_base_bytes);
  const MemoryNeed both = cm.stage_memory({0, 0, 3, true, true}, w);
  EXPECT_EQ(both.weights, 4000u + 5000u + 7u);
}

}  // namespace
}  // namespace tessera::plan
