// follow_plan: the planner's own choice (Plan::best) turned into the options that run it; the prediction is the
// planner's, read from its rows, never made again here.
#include "cli/plan_choice.h"

#include <algorithm>

#include "plan/cluster_file.h"
#include "plan/plan_report.h"
#include "util/error.h"

namespace tessera {
namespace {

std::string tps(double v) { return v >= 100 ? fmt::format("{:.0f}", v) : fmt::format("{:.1f}", v); }

bool is_group(plan::StrategyKind k) {
  return k == plan::StrategyKind::TensorParallel || k == plan::StrategyKind::ExpertParallel ||
         k == plan::StrategyKind::TensorExpertParallel;
}

// The worker --workers names `node` (the planner's name for it), or nullopt for the head.
std::optional<WorkerAddress> worker_of(const std::vector<WorkerAddress>& workers, const std::string& node) {
  for (const auto& w : workers) {
    if (plan::plan_node_name(w.name) == node) return w;
  }
  if (node != "local") fail("the plan names node '{}', which is not among --workers", node);
  return std::nullopt;
}

// "tensor parallel x3 (local, a, b) 41 tok/s decode, 350 tok/s prefill; the even split 20 and 300; local 25 and 900":
// the chosen row first, then the fastest others that can run.
std::string speeds(const plan::Plan& p, size_t chosen) {
  std::vector<size_t> order;
  for (size_t i = 0; i < p.strategies.size(); ++i) {
    const auto& s = p.strategies[i];
    if (i != chosen && s.feasible && s.runnable) order.push_back(i);
  }
  std::sort(order.begin(), order.end(),
            [&](size_t x, size_t y) { return p.strategies[x].pred.score_s < p.strategies[y].pred.score_s; });
  order.insert(order.begin(), chosen);
  if (order.size() > 3) order.resize(3);
  std::string out;
  for (size_t i : order) {
    const auto& s = p.strategies[i];
    const std::string name =
        s.kind == plan::StrategyKind::UserSplit ? std::string("the even pipeline (no --split given)") : s.name;
    out += fmt::format("{}{} {} tok/s decode, {} tok/s prefill", out.empty() ? "" : "; ", name,
                       tps(s.pred.decode_tps_c), tps(s.pred.prefill_tps));
  }
  return out;
}

// A group's ranks: the head first, then the workers in the planner's rank order.
void choose_group(const plan::Strategy& s, const std::vector<WorkerAddress>& workers, ModelOptions& mo,
                  ClusterOptions& co) {
  const plan::ParallelStage& g = s.parallel.front();
  if (s.parallel.size() != 1 || g.nodes.empty() || g.nodes.front() != "local") {
    fail("the planner's group {} does not have the head as its rank 0", s.name);
  }
  std::string ranks;
  for (size_t i = 1; i < g.nodes.size(); ++i) {
    const auto w = worker_of(workers, g.nodes[i]);
    if (!w) fail("the planner's group {} lists the head twice", s.name);
    ranks += fmt::format("{}{}={}", ranks.empty() ? "" : ",", w->name, w->address);
  }
  const int n = static_cast<int>(g.nodes.size());
  mo.tp = s.kind == plan::StrategyKind::ExpertParallel ? 1 : n;
  mo.ep = s.kind == plan::StrategyKind::TensorParallel ? 1 : n;
  if (mo.ep > 1) mo.ep_redundancy = static_cast<float>(g.ep_redundancy);  // the copies the planner counted
  mo.tp_shares.clear();
  for (double share : g.shares) mo.tp_shares += fmt::format("{}{:g}", mo.tp_shares.empty() ? "" : ",", share);
  co.workers = ranks;
  use_workers_as_ranks(mo, co);
}

// A pipeline (or one worker alone) as the split build_pipeline runs, in the names --workers gave.
void choose_pipeline(const plan::Strategy& s, const std::vector<WorkerAddress>& workers, ClusterOptions& co) {
  std::vector<plan::LayerRange> ranges = s.stages;
  for (auto& r : ranges) {
    if (const auto w = worker_of(workers, r.node)) r.node = w->name;
  }
  co.split = plan::format_ranges(ranges);
}

}  // namespace

bool plan_may_choose(const ModelOptions& mo, const ClusterOptions& co) {
  return co.enabled() && co.split.empty() && co.place.empty() && co.spares.empty() && mo.tp <= 1 && mo.ep <= 1 &&
         mo.pp <= 1;
}

std::string follow_plan(plan::CliPlanRequest r, ModelOptions& mo, ClusterOptions& co) {
  const auto workers = parse_workers(co.workers);
  r.workers = co.workers;
  r.split.clear();
  plan::CliPlan p;
  try {
    if (co.plan_cluster.empty()) {
      p = plan::make_cli_plan(r);
    } else {
      plan::Cluster given = plan::load_cluster_file(co.plan_cluster);
      if (given.head().name != "local") fail("{}: the head must be named 'local'", co.plan_cluster);
      for (const auto& w : workers) {
        if (!given.find(plan::plan_node_name(w.name))) {
          fail("{}: no node named '{}' for worker {}", co.plan_cluster, plan::plan_node_name(w.name), w.name);
        }
      }
      given.set_worker_groups(r.wire_type == "f32" ? 4 : 2);
      p = plan::make_cli_plan(r, &given);
    }
  } catch (const Error& e) {
    return fmt::format("plan: not available: {}; running the even pipeline over the workers\n", e.what());
  }
  if (!p.plan.best) return p.text;
  const plan::Strategy& s = p.plan.strategies[*p.plan.best];
  const bool group = is_group(s.kind) && s.is_parallel();
  // The planner's pipeline (or one worker alone) replaces the even split only where the even split does not fit:
  // where both run, the even split stays, as before (its rate against the planner's is in the plan).
  const bool even_fits = p.user && p.plan.strategies[*p.user].feasible;
  const bool pipeline =
      !even_fits && (s.kind == plan::StrategyKind::Pipeline ||
                     (s.kind == plan::StrategyKind::Single && !s.stages.empty() && s.stages.front().node != "local"));
  // One machine, the even split, or a row the runtime cannot run from these options: the even pipeline, as without
  // a plan, and the plan's own sentence about it.
  if (!group && !pipeline) return p.text;
  std::string what;
  if (group) {
    choose_group(s, workers, mo, co);
    const std::string flags = mo.tp > 1 && mo.ep > 1 ? fmt::format("--tp {} --ep {}", mo.tp, mo.ep)
                              : mo.tp > 1            ? fmt::format("--tp {}", mo.tp)
                                                     : fmt::format("--ep {}", mo.ep);
    what = fmt::format("{}{}{} --workers {}", flags, mo.tp_shares.empty() ? "" : " --tp-shares " + mo.tp_shares,
                       mo.ep > 1 ? fmt::format(" --ep-redundancy {:g}", mo.ep_redundancy) : "", mo.rank_workers);
  } else {
    choose_pipeline(s, workers, co);
    what = "--split " + co.split;
  }
  return plan::plan_text(p.plan, p.model, *p.cluster) +
         fmt::format(
             "plan: running the planner's choice, {} (as {}): {}. (--split, --tp or --ep choose the layout; "
             "--no-plan runs the even pipeline.)\n",
             s.name, what, speeds(p.plan, *p.plan.best));
}

}  // namespace tessera
