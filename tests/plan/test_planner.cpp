// The planner's choices and, above all, the failure cases of placement: no node ever holds zero layers without a
// reason shown, unknown names and bad splits are refused, plans that do not fit say what they need and what is there.
#include <gtest/gtest.h>

#include "model/quant_mix.h"
#include "plan/plan_report.h"
#include "plan/planner.h"
#include "util/error.h"

namespace tessera::plan {
namespace {

ModelCost shape(const char* name, const char* type = "q4_k_m") {
  return model_cost_from_shape(shape_preset(name).config, quant_mix_from_name(type), GgmlType::F16, name);
}

NodeProfile vm(const std::string& name, double mem_gb = 60, double gbps = 40, double cores = 16) {
  const PlanConstants k;
  NodeProfile n;
  n.name = name;
  n.mem_available_bytes = static_cast<uint64_t>(mem_gb * 1e9);
  n.mem_read_gbps = gbps;
  n.int8_gops = cores * k.int8_gops_per_core;
  n.f32_gflops = cores * k.f32_gflops_per_core;
  return n;
}

Cluster cluster(std::vector<NodeProfile> nodes, double gbit = 10, double rtt_ms = 0.2) {
  const std::string head = nodes.front().name;
  return Cluster(std::move(nodes), head, {}, LinkProfile{"*", "*", rtt_ms / 1e3, gbit, "test"});
}

// Local, pipelines and replicas only: tensor/expert-parallel groups have their own tests (test_parallel_plan.cpp),
// and over these fast links they would win most of the plans below.
PlanOptions no_groups(int64_t concurrency = 1);

PlanOptions options(int64_t concurrency = 1) {
  PlanOptions o;
  o.workload.prompt_tokens = 512;
  o.workload.n_gen = 128;
  o.workload.concurrency = concurrency;
  o.workload.n_ctx = 4096;
  return o;
}

PlanOptions no_groups(int64_t concurrency) {
  PlanOptions o = options(concurrency);
  o.parallel = ParallelRows::Off;
  return o;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// Every row that places layers covers 0..n_layer-1 exactly once, in order, with at least one layer per stage; every
// node it names has a memory entry.
void expect_sound_placements(const Plan& plan, int64_t n_layer) {
  for (const auto& s : plan.strategies) {
    EXPECT_FALSE(s.why.empty()) << s.name;
    EXPECT_EQ(s.memory.size(), s.nodes.size()) << s.name;
    if (s.kind == StrategyKind::Replicas) {
      for (const auto& st : s.stages) {
        EXPECT_EQ(st.first, 0);
        EXPECT_EQ(st.last, n_layer - 1);
      }
      continue;
    }
    if (s.stages.empty()) continue;
    int64_t next = 0;
    for (const auto& st : s.stages) {
      EXPECT_EQ(st.first, next) << s.name;
      EXPECT_GE(st.count(), 1) << s.name << " places no layer on " << st.node;
      next = st.last + 1;
    }
    EXPECT_EQ(next, n_layer) << s.name;
  }
}

TEST(Planner, LocalWinsWhenTheModelFits) {
  const ModelCost m = shape("qwen2.5-7b");
  const Cluster c = cluster({vm("vm1"), vm("vm2"), vm("vm3")});
  const Plan p = make_plan(m, c, no_groups());
  ASSERT_TRUE(p.chosen);
  EXPECT_EQ(p.strategies[*p.chosen].kind, StrategyKind::Local);
  EXPECT_EQ(p.strategies[*p.chosen].nodes, std::vector<std::string>{"vm1"});
  EXPECT_EQ(p.decision.rfind("Local wins", 0), 0u) << p.decision;
  // A split was considered and shown, and is no faster at decoding one stream.
  bool saw_pipeline = false;
  for (const auto& s : p.strategies) {
    if (s.kind != StrategyKind::Pipeline) continue;
    saw_pipeline = true;
    EXPECT_TRUE(s.feasible);
    EXPECT_LE(s.pred.decode_tps_1, p.strategies[*p.chosen].pred.decode_tps_1);
  }
  EXPECT_TRUE(saw_pipeline);
  expect_sound_placements(p, m.n_layer());
}

// A worker that probes a little faster than the head (5% more bandwidth: within a probe's noise) does not take the
// whole model away from the head: that would add a hop and a machine that can fail for a gain within the noise.
TEST(Planner, AWorkerALittleFasterThanTheHeadDoesNotTakeTheModel) {
  const ModelCost m = shape("qwen2.5-7b");
  const Cluster c = cluster({vm("head", 60, 40), vm("w1", 60, 42)});
  const Plan p = make_plan(m, c, no_groups());
  ASSERT_TRUE(p.chosen);
  bool saw_w1 = false;
  for (const auto& s : p.strategies) {
    if (s.kind == StrategyKind::Single && s.nodes == std::vector<std::string>{"w1"}) {
      saw_w1 = true;
      EXPECT_LT(s.pred.score_s, p.strategies[*p.chosen].pred.score_s);  // predicted faster, yet not chosen
    }
  }
  EXPECT_TRUE(saw_w1);
  EXPECT_EQ(p.strategies[*p.chosen].kind, StrategyKind::Local);
}

TEST(Planner, SplitsWhenTheModelDoesNotFitAndAdvisesASmallerQuantFirst) {
  const ModelCost m = shape("qwen2.5-72b", "q8_0");
  const Cluster c = cluster({vm("vm1"), vm("vm2"), vm("vm3")});
  const Plan p = make_plan(m, c, no_groups());
  ASSERT_TRUE(p.chosen);
  const Strategy& ch = p.strategies[*p.chosen];
  EXPECT_EQ(ch.kind, StrategyKind::Pipeline);
  EXPECT_TRUE(ch.feasible);
  for (const auto& mem : ch.memory) EXPECT_LE(mem.needs, mem.has);
  EXPECT_FALSE(p.strategies[0].feasible);  // local
  EXPECT_NE(p.strategies[0].why.find("Needs"), std::string::npos);
  // Smaller quantizations on one node come before the splits, never chosen (they need another file).
  std::vector<std::string> requants;
  size_t first_pipeline = p.strategies.size(), last_requant = 0;
  for (size_t i = 0; i < p.strategies.size(); ++i) {
    const auto& s = p.strategies[i];
    if (s.kind == StrategyKind::Requant) {
      requants.push_back(s.name);
      last_requant = i;
      EXPECT_FALSE(s.runnable);
      EXPECT_LT(s.model_bytes, m.total_bytes());
    }
    if (s.kind == StrategyKind::Pipeline) first_pipeline = std::min(first_pipeline, i);
  }
  EXPECT_EQ(requants, (std::vector<std::string>{"local as Q4_K_M", "local as Q3_K_M", "local as Q2_K"}));
  EXPECT_LT(last_requant, first_pipeline);
  ASSERT_FALSE(p.advice.empty());
  EXPECT_NE(p.advice[0].find("Q4_K_M"), std::string::npos) << p.advice[0];
  expect_sound_placements(p, m.n_layer());
}

TEST(Planner, NothingFitsShowsNeedsAndHas) {
  const ModelCost m = shape("llama-3-70b", "f16");
  const Cluster c = cluster({vm("a", 16), vm("b", 16)});
  const Plan p = make_plan(m, c, options());
  EXPECT_FALSE(p.chosen);
  EXPECT_FALSE(p.best);
  EXPECT_EQ(p.decision.rfind("Nothing fits", 0), 0u) << p.decision;
  for (const auto& s : p.strategies) {
    if (s.feasible) continue;
    EXPECT_NE(s.why.find("Needs "), std::string::npos) << s.why;
    EXPECT_NE(s.why.find(", has "), std::string::npos) << s.why;
    EXPECT_NE(s.why.find("GiB"), std::string::npos) << s.why;
  }
  // The JSON leaves out the speeds of plans that cannot run and keeps their memory numbers.
  const auto j = plan_json(p, m, c);
  EXPECT_TRUE(j["chosen"].is_null());
  for (const auto& s : j["strategies"]) {
    if (s["feasible"].get<bool>()) continue;
    EXPECT_TRUE(s["pred_decode_tps"].is_null());
    EXPECT_GT(s["memory_per_node"][0]["needs_bytes"].get<uint64_t>(), 0u);
  }
}

TEST(Planner, MoreNodesThanLayersAreSkippedWithAReason) {
  ModelCost m = shape("qwen2.5-0.5b");
  m.layers.resize(3);
  m.config.n_layer = 3;
  std::vector<NodeProfile> nodes;
  for (int i = 0; i < 5; ++i) nodes.push_back(vm(fmt::format("n{}", i)));
  const Cluster c = cluster(nodes);
  PlanOptions o = options();
  o.all_subsets = true;
  const Plan p = make_plan(m, c, o);
  bool skipped = false;
  for (const auto& sk : p.skipped) {
    EXPECT_FALSE(sk.reason.empty());
    if (sk.nodes.size() > 3) {
      skipped = true;
      EXPECT_NE(sk.reason.find("a node would hold no layer"), std::string::npos) << sk.reason;
    }
  }
  EXPECT_TRUE(skipped);
  for (const auto& s : p.strategies) EXPECT_LE(s.stages.size(), 3u) << s.name;
  bool advised = false;
  for (const auto& a : p.advice) advised = advised || a.find("more than 3 nodes") != std::string::npos;
  EXPECT_TRUE(advised);
  expect_sound_placements(p, 3);
}

TEST(Planner, NodeWhoseShareRoundsToNothingIsSkippedWithAReason) {
  const ModelCost m = shape("qwen2.5-7b");
  // A node 200 times slower than the others would get a fraction of one layer.
  const Cluster c = cluster({vm("a"), vm("b"), vm("slow", 60, 0.2)});
  PlanOptions o = no_groups();
  o.all_subsets = true;
  const Plan p = make_plan(m, c, o);
  bool found = false;
  for (const auto& sk : p.skipped) {
    if (std::find(sk.nodes.begin(), sk.nodes.end(), "slow") != sk.nodes.end()) {
      found = true;
      EXPECT_NE(sk.reason.find("slow's share"), std::string::npos) << sk.reason;
      EXPECT_NE(sk.reason.find("rounds to 0"), std::string::npos) << sk.reason;
    }
  }
  EXPECT_TRUE(found);
  expect_sound_placements(p, m.n_layer());
}

// Workers on the head's machine are no machines of their own: where their threads outnumber the CPUs they share,
// stages would take turns on them, so no pipeline or replica set holds them together; apart they are fine.
TEST(Planner, NodesSharingCpusOfOneMachineAreNotCombined) {
  const ModelCost m = shape("qwen2.5-7b");
  const auto placed = [](NodeProfile n, const std::string& machine, std::vector<int> cpus, int threads) {
    n.machine = machine;
    n.cpus = std::move(cpus);
    n.threads = threads;
    return n;
  };
  // The layout of the 2-vCPU benchmarks: the head and worker a pinned to CPU 0, worker b to CPU 1.
  const Cluster c =
      cluster({placed(vm("local"), "m1", {0}, 1), placed(vm("a"), "m1", {0}, 1), placed(vm("b"), "m1", {1}, 1)});
  PlanOptions o = options(8);
  o.all_subsets = true;
  const Plan p = make_plan(m, c, o);
  const auto holds = [](const std::vector<std::string>& nodes, const std::string& name) {
    return std::find(nodes.begin(), nodes.end(), name) != nodes.end();
  };
  bool pair_skipped = false, trio_skipped = false;
  for (const auto& sk : p.skipped) {
    if (sk.nodes.size() == 2 && holds(sk.nodes, "local") && holds(sk.nodes, "a")) {
      pair_skipped = true;
      EXPECT_EQ(sk.reason, "local, a run on one machine with 2 threads on 1 CPU (0): their stages would take turns");
    }
    trio_skipped = trio_skipped || sk.nodes.size() == 3;
  }
  EXPECT_TRUE(pair_skipped);
  EXPECT_TRUE(trio_skipped);
  bool apart = false, replicas = false;
  for (const auto& s : p.strategies) {
    EXPECT_FALSE(holds(s.nodes, "local") && holds(s.nodes, "a")) << s.name;
    apart = apart || (s.kind == StrategyKind::Pipeline && holds(s.nodes, "a") && holds(s.nodes, "b"));
    if (s.kind == StrategyKind::Replicas) {
      replicas = true;
      EXPECT_EQ(s.nodes.size(), 2u) << s.name;
    }
  }
  EXPECT_TRUE(apart);
  EXPECT_TRUE(replicas);
  expect_sound_placements(p, m.n_layer());
  bool advised = false;
  for (const auto& a : p.advice)
    advised = advised || a.rfind("Nodes that share CPUs are not combined (local, a", 0) == 0;
  EXPECT_TRUE(advised);

  // With --distribute and no set that can run apart, the decision names the reason instead of memory.
  o.distribute = true;
  const Plan d = make_plan(m, cluster({placed(vm("local"), "m1", {0}, 1), placed(vm("a"), "m1", {0}, 1)}), o);
  EXPECT_FALSE(d.best.has_value());
  EXPECT_EQ(d.decision,
            "No split can run with --distribute: local, a run on one machine with 2 threads on 1 CPU (0): "
            "their stages would take turns.");

  // Enough CPUs for the threads, other machines, or nodes of a cluster file (no machine): nothing is skipped so.
  for (const Cluster& ok :
       {cluster({placed(vm("local"), "m1", {0, 1}, 1), placed(vm("a"), "m1", {0, 1}, 1)}),
        cluster({placed(vm("local"), "m1", {0}, 1), placed(vm("a"), "m2", {0}, 1)}), cluster({vm("local"), vm("a")})}) {
    const Plan q = make_plan(m, ok, o);
    for (const auto& sk : q.skipped) EXPECT_EQ(sk.reason.find("take turns"), std::string::npos) << sk.reason;
  }
}

TEST(Planner, HeterogeneousSplitFollowsSpeedAndMemory) {
  const ModelCost m = shape("llama-3-70b");
  // fast: 3x the bandwidth of slow, but too little memory for 3/4 of the model; both hold it only together.
  const Cluster c = cluster({vm("fast", 30, 90), vm("slow", 40, 30)});
  const Plan p = make_plan(m, c, options());
  ASSERT_TRUE(p.chosen);
  const Strategy& ch = p.strategies[*p.chosen];
  ASSERT_EQ(ch.stages.size(), 2u);
  EXPECT_GT(ch.stages[0].count(), ch.stages[1].count());
  // Memory caps the fast node's share below its speed share (3/4 of 80 layers = 60 would not fit in 30 GB).
  EXPECT_LT(ch.stages[0].count(), 60);
  for (const auto& mem : ch.memory) EXPECT_LE(mem.needs, mem.has);
  expect_sound_placements(p, m.n_layer());
}

TEST(Planner, DistributeForcesASplit) {
  const ModelCost m = shape("qwen2.5-7b");
  const Cluster c = cluster({vm("vm1"), vm("vm2")});
  PlanOptions o = options();
  o.distribute = true;
  const Plan p = make_plan(m, c, o);
  ASSERT_TRUE(p.chosen);
  EXPECT_GE(p.strategies[*p.chosen].nodes.size(), 2u);
  EXPECT_EQ(p.decision.rfind("--distribute", 0), 0u) << p.decision;
}

TEST(Planner, UserSplitIsCheckedAndCompared) {
  const ModelCost m = shape("qwen2.5-7b");  // 28 layers
  const Cluster c = cluster({vm("vm1"), vm("vm2")});
  PlanOptions o = no_groups();
  o.split = parse_split("0-9@vm1,10-27@vm2");
  const Plan p = make_plan(m, c, o);
  ASSERT_TRUE(p.chosen);
  const Strategy& u = p.strategies[*p.chosen];
  EXPECT_EQ(u.kind, StrategyKind::UserSplit);
  EXPECT_EQ(format_ranges(u.stages), "0-9@vm1,10-27@vm2");
  ASSERT_TRUE(p.best);
  EXPECT_NE(*p.best, *p.chosen);
  EXPECT_NE(p.decision.find("Your split predicts"), std::string::npos) << p.decision;
  EXPECT_NE(p.decision.find("planner's choice (local"), std::string::npos) << p.decision;
}

TEST(Planner, UserSplitErrors) {
  const ModelCost m = shape("qwen2.5-7b");
  const Cluster c = cluster({vm("vm1"), vm("vm2")});
  auto plan_with = [&](const char* split) {
    PlanOptions o = options();
    o.split = parse_split(split);
    return make_plan(m, c, o);
  };
  const std::string unknown = error_of([&] { plan_with("0-9@vm1,10-27@vm9"); });
  EXPECT_NE(unknown.find("unknown node 'vm9' (valid: vm1, vm2)"), std::string::npos) << unknown;
  EXPECT_NE(error_of([&] { plan_with("0-9@vm1,11-27@vm2"); }).find("layer 10 are not placed"), std::string::npos);
  EXPECT_NE(error_of([&] { plan_with("0-10@vm1,10-27@vm2"); }).find("placed on both"), std::string::npos);
  EXPECT_NE(error_of([&] { plan_with("0-9@vm1,10-28@vm2"); }).find("28 layers (0-27)"), std::string::npos);
}

TEST(Planner, UserSplitThatDoesNotFitIsNotRun) {
  const ModelCost m = shape("llama-3-70b");
  const Cluster c = cluster({vm("big", 60), vm("small", 8)});
  PlanOptions o = options();
  o.split = parse_split("big:1,small:1");
  const Plan p = make_plan(m, c, o);
  EXPECT_FALSE(p.chosen);
  EXPECT_TRUE(p.best);  // the planner's own choice still exists
  EXPECT_EQ(p.decision.rfind("Your split does not fit", 0), 0u) << p.decision;
  EXPECT_NE(p.decision.find("on small"), std::string::npos) << p.decision;
}

TEST(Planner, ReplicasAtConcurrency) {
  const ModelCost m = shape("qwen2.5-7b");
  const Cluster c = cluster({vm("vm1"), vm("vm2"), vm("vm3")});
  const Plan p = make_plan(m, c, options(8));
  const Strategy* replicas = nullptr;
  for (const auto& s : p.strategies) {
    if (s.kind == StrategyKind::Replicas) replicas = &s;
  }
  ASSERT_NE(replicas, nullptr);
  EXPECT_EQ(replicas->nodes.size(), 3u);
  EXPECT_GT(replicas->pred.decode_tps_c, p.strategies[0].pred.decode_tps_c);
  // One stream still runs at one node's speed.
  EXPECT_NEAR(replicas->pred.decode_tps_1, p.strategies[0].pred.decode_tps_1, 1e-9);
  // Not shown for a single sequence.
  for (const auto& s : make_plan(m, c, options(1)).strategies) EXPECT_NE(s.kind, StrategyKind::Replicas);
}

TEST(Planner, ShownParallelRowsSayWhatTheyNeedAndAreNeverChosen) {
  const ModelCost m = shape("qwen3-30b-a3b");
  const Cluster c = cluster({vm("vm1"), vm("vm2")}, 100, 0.01);
  PlanOptions o = options();
  o.parallel = ParallelRows::Shown;  // --workers without --key-file: they cannot link to each other
  o.parallel_blocked = "over --workers it needs --key-file";
  o.over_workers = true;
  o.distribute = true;
  const Plan p = make_plan(m, c, o);
  int rows = 0;
  for (const auto& s : p.strategies) {
    if (s.is_parallel()) {
      ++rows;
      EXPECT_FALSE(s.runnable) << s.name;
      EXPECT_EQ(s.blocked, o.parallel_blocked) << s.name;
      EXPECT_NE(s.why.find("(over --workers it needs --key-file)"), std::string::npos) << s.why;
    }
  }
  EXPECT_EQ(rows, 3);  // tensor, expert, tensor+expert over the two nodes
  ASSERT_TRUE(p.chosen);
  EXPECT_TRUE(p.strategies[*p.chosen].runnable);
  EXPECT_FALSE(p.strategies[*p.chosen].is_parallel());
}

TEST(Planner, WorkloadErrors) {
  const ModelCost m = shape("qwen2.5-7b");
  const Cluster c = cluster({vm("vm1")});
  PlanOptions o = options();
  o.workload.n_ctx = 600;
  EXPECT_NE(error_of([&] { make_plan(m, c, o); }).find("needs a context of 640"), std::string::npos);
  o = options(0);
  EXPECT_NE(error_of([&] { make_plan(m, c, o); }).find("concurrency 0"), std::string::npos);
}

TEST(Planner, JsonHasTheStableShape) {
  const ModelCost m = shape("qwen2.5-7b");
  const Cluster c = cluster({vm("vm1"), vm("vm2")});
  const Plan p = make_plan(m, c, options(4));
  const auto j = plan_json(p, m, c);
  EXPECT_EQ(j["chosen"].get<size_t>(), *p.chosen);
  ASSERT_EQ(j["strategies"].size(), p.strategies.size());
  for (const auto& s : j["strategies"]) {
    for (const char* key :
         {"name", "nodes", "feasible", "memory_per_node", "pred_prefill_tps", "pred_decode_tps", "bottleneck", "why"}) {
      EXPECT_TRUE(s.contains(key)) << key;
    }
    EXPECT_TRUE(s["nodes"].is_array());
    EXPECT_GT(s["pred_decode_tps"].get<double>(), 0.0);
    EXPECT_GE(s["pred_decode_tps_concurrent"].get<double>(), s["pred_decode_tps"].get<double>());
  }
  const std::string text = plan_text(p, m, c);
  EXPECT_NE(text.find("decision:"), std::string::npos);
  EXPECT_NE(text.find("decode x4"), std::string::npos);
}

}  // namespace
}  // namespace tessera::plan
