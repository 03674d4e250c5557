// Live profiles: a worker answers the head's ProbeRequest with its measured profile (kept for later requests), the
// link to it is measured, and run/bench/serve's plan shows the split that runs against the planner's choice.
#include <gtest/gtest.h>

#include <cmath>

#include "hw/probe.h"
#include "model/stage.h"
#include "net/handshake.h"
#include "net/messages.h"
#include "plan/live_cluster.h"
#include "plan/plan_cli.h"
#include "plan/plan_report.h"
#include "support/test_paths.h"
#include "support/tiny_model.h"
#include "support/worker_process.h"
#include "util/error.h"

namespace tessera::plan {
namespace {

std::string stories() { return (test::source_dir() / "models/stories260K.gguf").string(); }

LiveProbeOptions quick(const std::filesystem::path& cache) {
  LiveProbeOptions o;
  o.local.seconds = 0.05;
  o.local.cache_path = cache;
  o.worker_seconds = 0.05;
  return o;
}

TEST(LiveCluster, ProbeMessagesRoundTrip) {
  net::ProbeReply reply;
  reply.threads = 2;
  reply.cores = 4;
  reply.mem_read_gbps = 12.5f;
  reply.mem_read_gbps_1t = 9.0f;
  reply.int8_gops = 400.0f;
  reply.f32_gflops = 100.0f;
  reply.mem_total_bytes = uint64_t{16} << 30;
  reply.mem_available_bytes = uint64_t{8} << 30;
  reply.age_s = 12.0f;
  reply.cpu = "Some CPU";
  reply.isa = "avx512";
  for (const net::Message& m : {net::Message(net::ProbeRequest{0.5f, 60, {}}), net::Message(reply)}) {
    EXPECT_EQ(net::decode_frame(net::encode_frame(m)), m);
  }
  EXPECT_THROW(net::encode_frame(net::ProbeRequest{0.0f, 60, {}}), Error);  // below 0.05 s
  // Peers to measure: node names and addresses; their reports carry figures or an error.
  const net::ProbeRequest peers{0.5f, 60, {{"b", "127.0.0.1:5001"}}};
  EXPECT_EQ(net::decode_frame(net::encode_frame(peers)), net::Message(peers));
  EXPECT_THROW(net::encode_frame(net::ProbeRequest{0.5f, 60, {{"b:1", "127.0.0.1:5001"}}}), Error);
  EXPECT_THROW(net::encode_frame(net::ProbeRequest{0.5f, 60, {{"b", ""}}}), Error);
  net::ProbeReply linked = reply;
  linked.peer_links = {{"b", 1e-4f, 1e9f, 9e8f, ""}, {"c", 0, 0, 0, "refused"}};
  EXPECT_EQ(net::decode_frame(net::encode_frame(linked)), net::Message(linked));
  linked.peer_links[0].rtt_s = -1;
  EXPECT_THROW(net::encode_frame(linked), Error);
  net::ProbeReply bad = reply;
  bad.threads = 0;
  EXPECT_THROW(net::encode_frame(bad), Error);
  EXPECT_EQ(net::msg_type_name(net::MsgType::ProbeReply), "ProbeReply");
}

TEST(LiveCluster, ParsesWorkerListsAndNamesNodes) {
  const auto w = parse_worker_list("a=127.0.0.1:5000,127.0.0.1:5001");
  ASSERT_EQ(w.size(), 2u);
  EXPECT_EQ(w[0].name, "a");
  EXPECT_EQ(w[0].address, "127.0.0.1:5000");
  EXPECT_EQ(w[1].name, "127.0.0.1:5001");
  EXPECT_EQ(plan_node_name("a"), "a");
  EXPECT_EQ(plan_node_name("127.0.0.1:5001"), "w127.0.0.1_5001");
  EXPECT_THROW(parse_worker_list("a=h:1,a=h:2"), Error);
  EXPECT_THROW(parse_worker_list("local=h:1"), Error);
  EXPECT_THROW(parse_worker_list("a=h"), Error);
  EXPECT_THROW(parse_worker_list("a=h:1,,b=h:2"), Error);
}

TEST(LiveCluster, WorkersReportTheirProfileAndKeepIt) {
  test::TempDir dir;
  test::WorkerProcess worker;
  const WorkerEndpoint ep{"b", worker.address()};
  const WorkerProbe first = probe_worker(ep, quick(dir / "probe.json"));
  EXPECT_EQ(first.node.name, "b");
  EXPECT_GT(first.node.mem_read_gbps, 0);
  EXPECT_GT(first.node.int8_gops, 0);
  EXPECT_GT(first.node.f32_gflops, 0);
  EXPECT_GT(first.node.mem_available_bytes, 0u);
  EXPECT_EQ(first.node.source, "worker probe");
  EXPECT_FALSE(first.node.repack);
  // A worker on this machine says so: the planner then counts its threads against the CPUs it shares.
  EXPECT_EQ(first.node.machine, machine_id());
  EXPECT_EQ(first.node.cpus, affinity_cpus());
  EXPECT_EQ(first.node.threads, 1);
  // And the machine's read rate the ranks on it share (a reader on each of its CPUs; its one thread's on one CPU).
  EXPECT_GT(first.node.machine_read_gbps, 0);
  ASSERT_EQ(first.node.batch_rates.size(), std::size(kBatchRateTokens));
  EXPECT_EQ(first.node.batch_rates.back().fraction, 1.0);
  if (online_cpus().size() == 1) {
    EXPECT_EQ(first.node.machine_read_gbps, first.node.mem_read_gbps);
  }
  EXPECT_EQ(first.link.a, "local");
  EXPECT_EQ(first.link.b, "b");
  EXPECT_GT(first.link.rtt_s, 0);
  EXPECT_LT(first.link.rtt_s, 0.5);
  EXPECT_GT(first.link.gbit_per_s, 0);
  EXPECT_EQ(first.link.source.rfind("measured: rtt", 0), 0u) << first.link.source;
  // The second head's request is answered from the worker's kept measurement, and the worker is free again.
  const WorkerProbe second = probe_worker(ep, quick(dir / "probe.json"));
  EXPECT_EQ(second.node.source.rfind("worker probe, ", 0), 0u) << second.node.source;
  EXPECT_EQ(second.node.mem_read_gbps, first.node.mem_read_gbps);
  EXPECT_TRUE(worker.running());

  try {
    probe_worker({"gone", "127.0.0.1:1"}, quick(dir / "probe.json"));
    FAIL() << "no error for an unreachable worker";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("worker gone (127.0.0.1:1): cannot get its profile"), std::string::npos)
        << e.what();
  }
}

// A worker's --repack is its own flag, not the head's: its profile says so, and the plan rates its prompt
// micro-batches as packed and counts the packed copy in its memory.
TEST(LiveCluster, WorkersReportTheirRepack) {
  test::TempDir dir;
  test::write_tiny_model(dir / "m.gguf", "llama", "q8_0");
  test::WorkerProcess packing({"--repack"}), plain;
  const WorkerProbe p = probe_worker({"p", packing.address()}, quick(dir / "probe.json"));
  EXPECT_TRUE(p.node.repack);
  EXPECT_FALSE(probe_worker({"q", plain.address()}, quick(dir / "probe.json")).node.repack);

  CliPlanRequest r;
  r.model_path = (dir / "m.gguf").string();
  r.workers = fmt::format("p={},q={}", packing.address(), plain.address());
  r.prompt_tokens = 64;
  r.n_gen = 16;
  r.probe_seconds = 0.05;
  const CliPlan plan = make_cli_plan(r);
  const Cluster& c = *plan.cluster;
  EXPECT_FALSE(c.head().repack);  // no --repack on the head
  EXPECT_TRUE(c.node("p").repack);
  EXPECT_FALSE(c.node("q").repack);
  ASSERT_TRUE(plan.user.has_value());
  const bool packs = Stage::packing_kernels().packed(GgmlType::Q8_0) != nullptr;
  for (const NodeMemory& m : plan.plan.strategies[*plan.user].memory) {
    EXPECT_EQ(m.packed > 0, packs && m.node == "p") << m.node;
  }
}

// Pipeline hops between workers are relayed by the head; a group's collectives take the workers' own link, which
// the first worker measures at the head's request.
TEST(LiveCluster, ClusterOfTheHeadAndTwoWorkersRelaysHopsAndMeasuresTheWorkersLink) {
  test::TempDir dir;
  test::WorkerProcess a, b;
  const std::vector<WorkerEndpoint> ws = {{"a", a.address()}, {"b", b.address()}};
  const Cluster c = probe_live_cluster(ws, quick(dir / "probe.json"));
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c.node_names(), "local, a, b");
  const LinkProfile la = c.link("local", "a"), lb = c.link("local", "b"), ab = c.link("a", "b");
  EXPECT_DOUBLE_EQ(ab.rtt_s, la.rtt_s + lb.rtt_s);
  EXPECT_LT(ab.gbit_per_s, std::min(la.gbit_per_s, lb.gbit_per_s));
  ASSERT_EQ(c.group_links().size(), 1u);
  const LinkProfile direct = c.group_link("a", "b");
  EXPECT_EQ(direct.a, "a");
  EXPECT_EQ(direct.b, "b");
  EXPECT_GT(direct.rtt_s, 0);
  EXPECT_LT(direct.rtt_s, 0.5);
  EXPECT_GT(direct.gbit_per_s, 0);
  EXPECT_EQ(direct.source.rfind("measured by a: rtt", 0), 0u) << direct.source;
  EXPECT_EQ(c.group_link("local", "b").source, lb.source);  // the head's own link is direct already
  EXPECT_FALSE(c.unreachable("a", "b"));
  // Both workers are free again for the run that follows.
  EXPECT_TRUE(a.running());
  EXPECT_TRUE(b.running());
  EXPECT_EQ(probe_worker({"b", b.address()}, quick(dir / "probe.json")).node.name, "b");

  // A peer that cannot be reached is reported, not thrown: groups over it cannot run.
  const WorkerProbe p =
      probe_worker({"a", a.address()}, quick(dir / "probe.json"), std::vector<WorkerEndpoint>{{"gone", "127.0.0.1:1"}});
  EXPECT_TRUE(p.peer_links.empty());
  ASSERT_EQ(p.unreachable.size(), 1u);
  EXPECT_EQ(p.unreachable[0].peer, "gone");
  EXPECT_FALSE(p.unreachable[0].why.empty());
}

// The measured pair figures are what the plan's group rows use and show: `plan --workers` and the placement log of
// run/bench/serve print the workers' own link, and the JSON lists it.
TEST(LiveCluster, CliPlanShowsTheWorkersLinkAndUsesItForGroups) {
  test::TempDir dir;
  test::write_tiny_model(dir / "m.gguf", "llama", "q8_0");
  test::WorkerProcess a, b;
  CliPlanRequest r;
  r.model_path = (dir / "m.gguf").string();
  r.workers = fmt::format("a={},b={}", a.address(), b.address());
  r.prompt_tokens = 64;
  r.n_gen = 16;
  r.probe_seconds = 0.05;
  r.threads = 1;  // the head and one worker on 2 CPUs are not crowded: their groups get rows
  const CliPlan plan = make_cli_plan(r);
  const Cluster& c = *plan.cluster;
  ASSERT_EQ(c.group_links().size(), 1u);
  const LinkProfile direct = c.group_links().front();
  EXPECT_NE(plan.text.find("a <-> b direct (tensor/expert-parallel groups)"), std::string::npos) << plan.text;
  EXPECT_NE(plan.text.find("measured by a: rtt"), std::string::npos) << plan.text;
  const nlohmann::ordered_json j = plan_json(plan.plan, plan.model, c);
  ASSERT_EQ(j["group_links"].size(), 1u);
  EXPECT_EQ(j["group_links"][0]["between"][0], "a");
  EXPECT_DOUBLE_EQ(j["group_links"][0]["rtt_s"].get<double>(), direct.rtt_s);
  int groups = 0;
  for (const Strategy& s : plan.plan.strategies) {
    if (!s.is_parallel() || s.kind == StrategyKind::TensorPipeline) continue;
    ++groups;
    // The group's slowest link of every pair: the workers' own one among them.
    double slowest = 0;
    for (size_t i = 0; i < s.nodes.size(); ++i) {
      for (size_t k = i + 1; k < s.nodes.size(); ++k)
        slowest = std::max(slowest, c.group_link(s.nodes[i], s.nodes[k]).rtt_s);
    }
    EXPECT_DOUBLE_EQ(s.parallel.front().collectives.link_rtt_s, slowest) << s.name;
    // Without --key-file the workers cannot form a group: the row says so and is not chosen.
    EXPECT_FALSE(s.runnable);
    EXPECT_NE(s.why.find("over --workers it needs --key-file"), std::string::npos) << s.why;
    EXPECT_TRUE(s.why.find("Beats ") != std::string::npos || s.why.find("Loses to ") != std::string::npos) << s.why;
  }
  EXPECT_GT(groups, 0) << plan.text;
  // A group of all three (crowded on this machine, so not a row here) waits for the slowest of its three links.
  const CostModel cm(plan.model, c, PlanConstants{});
  const CollectiveProfile all = cm.collectives_for(std::vector<size_t>{0, 1, 2});
  const double slowest = std::max({c.group_link("local", "a").rtt_s, c.group_link("local", "b").rtt_s, direct.rtt_s});
  EXPECT_DOUBLE_EQ(all.link_rtt_s, slowest);
  EXPECT_TRUE(all.direct(8192));  // a decode step's all-reduce: the direct exchange over the worker links
}

TEST(LiveCluster, CliPlanShowsTheSplitThatRuns) {
  test::TempDir dir;
  test::WorkerProcess a, b;
  CliPlanRequest r;
  r.model_path = stories();
  r.workers = fmt::format("a={},b={}", a.address(), b.address());
  r.prompt_tokens = 64;
  r.n_gen = 16;
  r.probe_seconds = 0.05;
  const CliPlan even = make_cli_plan(r);
  ASSERT_TRUE(even.user.has_value());
  const Strategy& s = even.plan.strategies[*even.user];
  EXPECT_EQ(s.kind, StrategyKind::UserSplit);
  ASSERT_EQ(s.stages.size(), 2u);
  EXPECT_EQ(s.stages[0].node, "a");
  EXPECT_EQ(s.stages[1].node, "b");
  EXPECT_EQ(s.stages[0].first, 0);
  EXPECT_EQ(s.stages[1].last, even.model.n_layer() - 1);
  EXPECT_NE(even.text.find("your split"), std::string::npos) << even.text;
  EXPECT_NE(even.text.find("the even split over the workers (no --split given)"), std::string::npos) << even.text;

  r.split = "0-0@local,1-4@b";
  const CliPlan given = make_cli_plan(r);
  const Strategy& g = given.plan.strategies[*given.user];
  ASSERT_EQ(g.stages.size(), 2u);
  EXPECT_EQ(g.stages[0].node, "local");
  EXPECT_EQ(g.stages[1].node, "b");
  EXPECT_NE(given.text.find("your split"), std::string::npos) << given.text;

  // A tiny model over loopback: one machine wins (the hops cost more than a whole forward pass), and the text says
  // so in plain words.
  EXPECT_LT(given.plan.strategies.front().pred.score_s, g.pred.score_s);
  EXPECT_NE(given.text.find("One machine would be faster"), std::string::npos) << given.text;

  r.split = "0-4@nosuch";
  const std::string text = plan_for_cli(r);
  EXPECT_EQ(text.rfind("plan: not available: ", 0), 0u) << text;
  EXPECT_NE(text.find("nosuch"), std::string::npos) << text;
}

// run/bench/serve --repack packs the head's own stage: the plan they print counts the packed copy on the head.
TEST(LiveCluster, CliPlanCountsTheHeadsRepack) {
  test::TempDir dir;
  test::write_tiny_model(dir / "m.gguf", "llama", "q8_0");
  CliPlanRequest r;
  r.model_path = (dir / "m.gguf").string();
  r.prompt_tokens = 64;
  r.n_gen = 16;
  r.probe_seconds = 0.05;
  const CliPlan plain = make_cli_plan(r);
  r.repack = true;
  const CliPlan packed = make_cli_plan(r);
  EXPECT_FALSE(plain.cluster->head().repack);
  EXPECT_TRUE(packed.cluster->head().repack);
  const NodeMemory& m0 = plain.plan.strategies.front().memory.front();
  const NodeMemory& m1 = packed.plan.strategies.front().memory.front();
  EXPECT_EQ(m0.packed, 0u);
  EXPECT_EQ(m1.packed, packed.model.total_packed_bytes());
  EXPECT_EQ(m1.packed > 0, Stage::packing_kernels().packed(GgmlType::Q8_0) != nullptr);
  EXPECT_EQ(m1.weights, m0.weights);
  EXPECT_EQ(m1.needs, m1.weights + m1.kv_cache + m1.buffers + m1.packed);
}

}  // namespace
}  // namespace tessera::plan
