// The planner's tensor/expert parallel rows: for each mode and group size the best group that includes the head,
// and tensor-parallel groups as pipeline stages (TP x PP); a group row's memory, prediction and what it needs to
// run.
#include <algorithm>
#include <cmath>

#include "plan/planner_internal.h"
#include "plan/split_spec.h"
#include "util/error.h"

namespace tessera::plan::detail {
namespace {

// The best of each size: feasible first, then the shortest predicted time.
void keep_better(std::optional<Strategy>& slot, Strategy s) {
  if (!slot || (s.feasible && !slot->feasible) ||
      (s.feasible == slot->feasible && s.pred.score_s < slot->pred.score_s)) {
    slot = std::move(s);
  }
}

void append_found(std::vector<std::optional<Strategy>>& best, std::vector<Strategy>& out) {
  for (auto& s : best) {
    if (s) out.push_back(std::move(*s));
  }
}

}  // namespace

std::vector<double> Planner::speed_shares(const std::vector<size_t>& nodes) const {
  std::vector<double> rates;
  for (size_t n : nodes) rates.push_back(c_.nodes()[n].mem_read_gbps);
  const double lo = *std::min_element(rates.begin(), rates.end());
  const double hi = *std::max_element(rates.begin(), rates.end());
  if (hi <= lo * 1.01) return {};
  for (auto& r : rates) r = std::round(10.0 * r / lo) / 10.0;  // "--tp-shares 1,1.5": a tenth is close enough
  return rates;
}

Strategy Planner::evaluate_groups(std::string name, StrategyKind kind, const std::vector<StageSpec>& specs) const {
  const Workload& w = o_.workload;
  Strategy s;
  s.name = std::move(name);
  s.kind = kind;
  s.model_label = m_.label;
  s.model_bytes = m_.total_bytes();
  s.feasible = true;
  // Under mpirun, groups as stages run (--tp N --pp P); over --workers not yet.
  const bool piped_runs = o_.mpi_ranks;
  s.runnable = o_.parallel == ParallelRows::Runnable && (kind != StrategyKind::TensorPipeline || piped_runs);
  if (kind == StrategyKind::TensorPipeline && !piped_runs) {
    s.blocked = o_.over_workers ? "not over --workers yet: --tp with --pp" : "not in the runtime yet: --tp with --pp";
  } else if (o_.parallel != ParallelRows::Runnable) {
    s.blocked = o_.parallel_blocked;
  }
  for (const auto& spec : specs) {
    if (!spec.group) continue;
    for (size_t i = 0; s.blocked.empty() && i < spec.group->nodes.size(); ++i) {
      for (size_t j = i + 1; s.blocked.empty() && j < spec.group->nodes.size(); ++j) {
        const std::string &a = c_.nodes()[spec.group->nodes[i]].name, &b = c_.nodes()[spec.group->nodes[j]].name;
        if (const auto why = c_.unreachable(a, b)) {
          s.runnable = false;
          s.blocked = fmt::format("{} cannot reach {} directly: {}", a, b, *why);
        }
      }
    }
  }
  const double ctx = static_cast<double>(w.prompt_tokens) + static_cast<double>(w.n_gen) / 2.0;
  for (const auto& spec : specs) {
    if (!spec.group) {
      // A stage of one node (--place): a "group" of one rank, with no collectives, for the arithmetic.
      s.parallel.push_back(single_stage(spec, ctx));
      const MemoryNeed need = cm_.stage_memory(spec, w);
      NodeMemory mem{c_.nodes()[spec.node].name,
                     range_text(spec.first, spec.last),
                     need.weights,
                     need.kv_cache,
                     need.buffers,
                     need.packed,
                     need.total(),
                     need.available};
      s.feasible = s.feasible && mem.fits();
      s.nodes.push_back(mem.node);
      s.memory.push_back(std::move(mem));
      s.stages.push_back({c_.nodes()[spec.node].name, spec.first, spec.last});
      continue;
    }
    const ParallelGroup& g = *spec.group;
    const auto needs = cm_.group_memory(spec, w);
    ParallelStage ps;
    ps.first = spec.first;
    ps.last = spec.last;
    ps.mode = g.layout.mode;
    ps.shares = g.layout.shares;
    ps.ep_redundancy = g.layout.ep_redundancy;
    ps.cuts = g.layout.cuts;
    ps.collectives = g.collectives;
    ps.decode = cm_.group_pass(spec, 1.0, 1.0, ctx, spec.last_stage ? 1.0 : 0.0);
    for (size_t r = 0; r < g.nodes.size(); ++r) {
      const std::string& node = c_.nodes()[g.nodes[r]].name;
      s.nodes.push_back(node);
      ps.nodes.push_back(node);
      ps.read_rate.push_back(cm_.rank_read_rate(g, r));
      NodeMemory mem{node,
                     fmt::format("rank {} of {}", r, range_text(spec.first, spec.last)),
                     needs[r].weights,
                     needs[r].kv_cache,
                     needs[r].buffers,
                     needs[r].packed,
                     needs[r].total(),
                     needs[r].available};
      s.feasible = s.feasible && mem.fits();
      s.memory.push_back(std::move(mem));
    }
    s.stages.push_back({ps.nodes.front(), spec.first, spec.last});
    s.parallel.push_back(std::move(ps));
  }
  s.pred = cm_.predict_pipeline(specs, w);
  return s;
}

std::vector<Strategy> Planner::parallel_rows(const std::vector<std::vector<size_t>>& sets,
                                             std::vector<Skipped>& skipped) const {
  std::vector<Strategy> out;
  const int64_t n_layer = m_.n_layer();
  for (const ParallelMode mode : modes_for(m_)) {
    std::vector<std::optional<Strategy>> best(c_.size() + 1);
    for (const auto& set : sets) {
      // Rank 0 is where requests arrive: the head leads every group.
      if (set.size() < 2 || set.front() != c_.head_index()) continue;
      // Under --ep: copies of experts where they fit (an even deal), none where only that fits.
      const std::vector<double> copies =
          mode == ParallelMode::Tensor ? std::vector<double>{0.0} : std::vector<double>{kDefaultEpRedundancy, 0.0};
      for (const double redundancy : copies) {
        std::shared_ptr<const ParallelGroup> g;
        try {
          g = cm_.make_group(set, mode, speed_shares(set), redundancy);
        } catch (const Error& e) {
          skipped.push_back({names(set), fmt::format("{} x{}: {}", parallel_mode_name(mode), set.size(), e.what())});
          break;
        }
        const std::vector<StageSpec> specs{{set.front(), 0, n_layer - 1, true, true, g}};
        Strategy s = evaluate_groups(fmt::format("{} x{}", parallel_mode_name(mode), set.size()), kind_of(mode), specs);
        keep_better(best[set.size()], std::move(s));
      }
    }
    append_found(best, out);
  }
  return out;
}

std::vector<Strategy> Planner::tensor_pipeline_rows(const std::vector<std::vector<size_t>>& sets) const {
  std::vector<Strategy> out;
  std::vector<std::optional<Strategy>> best(c_.size() + 1);
  for (const auto& set : sets) {
    const size_t n = set.size();
    if (n < 4 || set.front() != c_.head_index()) continue;
    for (size_t g = 2; g <= n / 2; ++g) {
      if (n % g != 0) continue;
      const size_t stages = n / g;
      if (static_cast<int64_t>(stages) > m_.n_layer()) continue;
      // Groups of g consecutive nodes in ring order; layers in proportion to each group's read bandwidth.
      std::vector<std::vector<size_t>> groups(stages);
      std::vector<double> speed(stages, 0.0);
      for (size_t i = 0; i < n; ++i) {
        groups[i / g].push_back(set[i]);
        speed[i / g] += cm_.read_rate(set[i]);
      }
      const std::vector<int64_t> counts = proportional_counts(m_.layer_weight_bytes(), speed);
      if (std::any_of(counts.begin(), counts.end(), [](int64_t x) { return x <= 0; })) continue;
      std::vector<StageSpec> specs;
      int64_t first = 0;
      try {
        for (size_t st = 0; st < stages; ++st) {
          auto group = cm_.make_group(groups[st], ParallelMode::Tensor, speed_shares(groups[st]));
          specs.push_back({groups[st].front(), first, first + counts[st] - 1, st == 0, st + 1 == stages, group});
          first += counts[st];
        }
      } catch (const Error&) {
        continue;
      }
      Strategy s =
          evaluate_groups(fmt::format("tensor x{} pipeline x{}", g, stages), StrategyKind::TensorPipeline, specs);
      keep_better(best[n], std::move(s));
    }
  }
  append_found(best, out);
  return out;
}

Strategy Planner::run_pipeline_row() const {
  const PlanOptions::ParallelRun& run = *o_.run;
  const auto stages = static_cast<size_t>(run.pp);
  const size_t n = c_.size() / stages;
  if (n * stages != c_.size() || run.stage_layers.size() != stages) {
    fail("internal: {} ranks in {} stages with {} layer ranges", c_.size(), stages, run.stage_layers.size());
  }
  std::vector<StageSpec> specs;
  for (size_t st = 0; st < stages; ++st) {
    // The runtime's order: rank 0 leads the last stage, where the tokens are sampled.
    std::vector<size_t> nodes;
    for (size_t j = 0; j < n; ++j) nodes.push_back((stages - 1 - st) * n + j);
    StageSpec spec{nodes.front(), run.stage_layers[st].first, run.stage_layers[st].second, st == 0, st + 1 == stages};
    if (n > 1) {
      auto g = std::make_shared<ParallelGroup>(*cm_.make_group(nodes, run.mode, run.shares, run.ep_redundancy));
      if (run.stage_collectives) g->collectives = *run.stage_collectives;
      spec.group = std::move(g);
    }
    specs.push_back(std::move(spec));
  }
  if (n == 1) {
    Strategy s = evaluate_stages(fmt::format("your --pp {}", run.pp), StrategyKind::UserSplit, specs, cm_, o_.workload);
    s.runnable = true;
    return s;
  }
  Strategy s = evaluate_groups(
      fmt::format("your {} --pp {}", parallel_flags(run.mode, static_cast<int>(n), run.ep_redundancy), run.pp),
      StrategyKind::TensorPipeline, specs);
  s.runnable = true;
  s.blocked.clear();
  return s;
}

}  // namespace tessera::plan::detail
