// The planner over --workers: a group's collectives go over the links its members measured (the head's to each
// worker, and each worker's to the others), as the link communicator runs them (a direct exchange for a decode
// step's all-reduce, a ring for a prompt's), with the wire type's bytes; the choice between local, a pipeline and
// tensor parallel flips with those links' RTT and bandwidth, and every group row says why it wins or loses.
#include <gtest/gtest.h>

#include "model/quant_mix.h"
#include "plan/collective_model.h"
#include "plan/plan_report.h"
#include "plan/planner.h"

namespace tessera::plan {
namespace {

ModelCost shape(const char* name, const char* type) {
  return model_cost_from_shape(shape_preset(name).config, quant_mix_from_name(type), GgmlType::F16, name);
}

NodeProfile vm(const std::string& name) {
  const PlanConstants k;
  NodeProfile n;
  n.name = name;
  n.mem_available_bytes = static_cast<uint64_t>(60e9);
  n.mem_read_gbps = 40;
  n.int8_gops = 16 * k.int8_gops_per_core;
  n.f32_gflops = 16 * k.f32_gflops_per_core;
  return n;
}

// The head and two workers as live_cluster makes them: the head's measured links, the pipeline's relayed hop
// between the workers, and the workers' own direct link for groups.
Cluster live(LinkProfile head_link, LinkProfile peer_link, int wire_bytes = 2) {
  std::vector<LinkProfile> links = {head_link, head_link};
  links[0].a = links[1].a = "local";
  links[0].b = "a";
  links[1].b = "b";
  links.push_back({"a", "b", 2 * head_link.rtt_s, head_link.gbit_per_s / 2, "relayed by the head"});
  Cluster c({vm("local"), vm("a"), vm("b")}, "local", links);
  peer_link.a = "a";
  peer_link.b = "b";
  c.set_group_links({peer_link});
  c.set_worker_groups(wire_bytes);
  return c;
}

LinkProfile link(double gbit, double rtt_ms) { return {"", "", rtt_ms / 1e3, gbit, "test"}; }

PlanOptions over_workers() {
  PlanOptions o;
  o.workload.prompt_tokens = 512;
  o.workload.n_gen = 128;
  o.workload.n_ctx = 4096;
  o.over_workers = true;
  return o;
}

const Strategy& chosen(const Plan& p) {
  EXPECT_TRUE(p.chosen.has_value()) << p.decision;
  return p.strategies.at(p.chosen.value_or(0));
}

const Strategy* row(const Plan& p, std::string_view name) {
  for (const auto& s : p.strategies) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

TEST(WorkerLinks, DecodeAllReducesAreADirectExchangeAndPromptsARing) {
  // 2 ranks, 10 Gbit/s (1.25 GB/s), 0.2 ms RTT, 40 us a message, f16 on the wire.
  const CollectiveProfile c = link_all_reduce(2, 0.2e-3, 1.25e9, 40e-6, 2, 32768);
  ASSERT_TRUE(c.direct(8192));
  EXPECT_NEAR(c.all_reduce_s(8192), 100e-6 + 40e-6 + 8192 * 0.5 / 1.25e9, 1e-12);
  EXPECT_NEAR(c.latency_for(8192), 140e-6, 1e-12);
  // Above 32 KiB: the ring's 2(2-1) steps, each byte crossing 2(2-1)/2 times at half its f32 size.
  ASSERT_FALSE(c.direct(65536));
  EXPECT_NEAR(c.all_reduce_s(65536), 2 * 140e-6 + 65536 * 0.5 / 1.25e9, 1e-12);
  // Three ranks: one round trip's half and two messages; each member's link carries the buffer to both others.
  const CollectiveProfile three = link_all_reduce(3, 0.2e-3, 1.25e9, 40e-6, 4, 32768);
  EXPECT_NEAR(three.all_reduce_s(8192), 100e-6 + 2 * 40e-6 + 2 * 8192 / 1.25e9, 1e-12);
  EXPECT_NE(collective_formula_text(three, 8192).find("direct exchange among 3"), std::string::npos);
  EXPECT_NE(collective_formula_text(three, 1 << 20).find("ring of 3"), std::string::npos);
}

TEST(WorkerLinks, TheGroupsSlowestLinkIsTheWorkersOwn) {
  // The head's links are fast; the workers' link to each other is what a group of all three waits for.
  const Cluster c = live(link(25, 0.05), link(1, 2));
  const CostModel cm(shape("qwen2.5-72b", "q4_k_m"), c, PlanConstants{});
  const CollectiveProfile all = cm.collectives_for(std::vector<size_t>{0, 1, 2});
  EXPECT_NEAR(all.link_rtt_s, 2e-3, 1e-12);
  EXPECT_NEAR(all.link_bytes_per_s, 1e9 / 8, 1);
  EXPECT_EQ(all.link_pair, "a <-> b");
  const CollectiveProfile two = cm.collectives_for(std::vector<size_t>{0, 1});
  EXPECT_NEAR(two.link_rtt_s, 0.05e-3, 1e-12);
  // A pipeline hop between the workers is still the head's relay.
  EXPECT_NEAR(c.link("a", "b").rtt_s, 0.1e-3, 1e-12);
  EXPECT_NEAR(c.group_link("a", "b").rtt_s, 2e-3, 1e-12);
}

TEST(WorkerLinks, LocalOrTensorParallelByTheLinks) {
  // Qwen2.5-72B Q4_K_M fits one VM: tensor parallel wins over fast links and loses over slow ones.
  const ModelCost m = shape("qwen2.5-72b", "q4_k_m");
  const Plan fast = make_plan(m, live(link(25, 0.05), link(25, 0.05)), over_workers());
  EXPECT_EQ(chosen(fast).kind, StrategyKind::TensorParallel) << fast.decision;
  EXPECT_EQ(chosen(fast).nodes.size(), 3u);
  EXPECT_NE(chosen(fast).why.find("Beats local: 160 all-reduces x"), std::string::npos) << chosen(fast).why;
  EXPECT_NE(fast.decision.find("--tp 3 --workers a,b"), std::string::npos) << fast.decision;

  const Plan slow = make_plan(m, live(link(1, 20), link(1, 20)), over_workers());
  EXPECT_EQ(chosen(slow).kind, StrategyKind::Local) << slow.decision;
  const Strategy* tp = row(slow, "tensor parallel x2");
  ASSERT_NE(tp, nullptr);
  EXPECT_TRUE(tp->runnable);
  EXPECT_NE(tp->why.find("Loses to local: 160 all-reduces x"), std::string::npos) << tp->why;
  EXPECT_NE(tp->why.find("20.0 ms RTT"), std::string::npos) << tp->why;
}

TEST(WorkerLinks, PipelineOrTensorParallelByTheLinks) {
  // At Q8_0 it fits no VM alone: over fast links a group, over long ones a pipeline (2 hops a token, not 160
  // all-reduces).
  const ModelCost m = shape("qwen2.5-72b", "q8_0");
  const Plan fast = make_plan(m, live(link(10, 0.2), link(10, 0.2)), over_workers());
  EXPECT_EQ(chosen(fast).kind, StrategyKind::TensorParallel) << fast.decision;

  const Plan far = make_plan(m, live(link(10, 40), link(10, 40)), over_workers());
  EXPECT_EQ(chosen(far).kind, StrategyKind::Pipeline) << far.decision;
  const Strategy* tp = row(far, "tensor parallel x3");
  ASSERT_NE(tp, nullptr);
  EXPECT_NE(tp->why.find("Loses to pipeline x"), std::string::npos) << tp->why;
}

TEST(WorkerLinks, ASlowLinkBetweenTheWorkersKeepsTheGroupToTwo) {
  const ModelCost m = shape("qwen2.5-72b", "q4_k_m");
  const Cluster cl = live(link(25, 0.05), link(0.1, 30));
  const Plan p = make_plan(m, cl, over_workers());
  const Strategy& c = chosen(p);
  EXPECT_EQ(c.kind, StrategyKind::TensorParallel) << p.decision;
  EXPECT_EQ(c.nodes.size(), 2u) << p.decision;
  const Strategy* three = row(p, "tensor parallel x3");
  ASSERT_NE(three, nullptr);
  EXPECT_NE(three->why.find("a <-> b"), std::string::npos) << three->why;
  const std::string text = plan_text(p, m, cl);
  EXPECT_NE(text.find("a <-> b direct (tensor/expert-parallel groups): 0.1 Gbit/s, 30 ms RTT"), std::string::npos)
      << text;
}

TEST(WorkerLinks, GroupsThatCannotRunAreShownWithWhatTheyNeed) {
  const ModelCost m = shape("qwen2.5-72b", "q4_k_m");
  Cluster c = live(link(25, 0.05), link(25, 0.05));
  c.add_unreachable("a", "b", "connection refused");
  const Plan p = make_plan(m, c, over_workers());
  const Strategy* three = row(p, "tensor parallel x3");
  ASSERT_NE(three, nullptr);
  EXPECT_FALSE(three->runnable);
  EXPECT_NE(three->why.find("a cannot reach b directly: connection refused"), std::string::npos) << three->why;
  EXPECT_EQ(chosen(p).nodes.size(), 2u) << p.decision;

  PlanOptions no_key = over_workers();
  no_key.parallel = ParallelRows::Shown;
  no_key.parallel_blocked = "over --workers it needs --key-file";
  const Plan k = make_plan(m, live(link(25, 0.05), link(25, 0.05)), no_key);
  EXPECT_FALSE(chosen(k).is_parallel()) << k.decision;
  const Strategy* tp = row(k, "tensor parallel x2");
  ASSERT_NE(tp, nullptr);
  EXPECT_NE(tp->why.find("(over --workers it needs --key-file)"), std::string::npos) << tp->why;
}

}  // namespace
}  // namespace tessera::plan
