// The planner's tensor/expert parallel rows: for each mode and group size the best group that includes the head,
// and tensor-parallel groups as pipeline stages (TP x PP).
#include <algorithm>

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

std::vector<Strategy> Planner::parallel_rows(const std::vector<std::vector<size_t>>& sets,
                                             std::vector<Skipped>& skipped) const {
  std::vector<Strategy> out;
  const int64_t n_layer = m_.n_layer();
  for (const ParallelMode mode : modes_for(m_)) {
    std::vector<std::optional<Strategy>> best(c_.size() + 1);
    for (const auto& set : sets) {
      // Rank 0 is where requests arrive: the head leads every group.
      if (set.size() < 2 || set.front() != c_.head_index()) continue;
      std::shared_ptr<const ParallelGroup> g;
      try {
        g = cm_.make_group(set, mode, speed_shares(set));
      } catch (const Error& e) {
        skipped.push_back({names(set), fmt::format("{} x{}: {}", parallel_mode_name(mode), set.size(), e.what())});
        continue;
      }
      const std::vector<StageSpec> specs{{set.front(), 0, n_layer - 1, true, true, g}};
      Strategy s = evaluate_groups(fmt::format("{} x{}", parallel_mode_name(mode), set.size()), kind_of(mode), specs);
      keep_better(best[set.size()], std::move(s));
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

}  // namespace tessera::plan::detail
