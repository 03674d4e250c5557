// The row of a user's --place layout over --workers (a pipeline whose stages are nodes or tensor/expert-parallel
// groups): each group stage costs its slowest rank plus its collectives over the members' measured links (the
// slowest link of every pair, as the planner's own group rows), a stage of one node its pass, and the pipeline the
// hops between the stages' leaders.
#include <algorithm>

#include "plan/planner_internal.h"
#include "plan/split_spec.h"
#include "util/error.h"

namespace tessera::plan::detail {

ParallelStage Planner::single_stage(const StageSpec& spec, double ctx) const {
  ParallelStage ps;
  ps.nodes = {c_.nodes()[spec.node].name};
  ps.first = spec.first;
  ps.last = spec.last;
  ps.cuts = "the stage's layers whole";
  const RankPass rank = cm_.rank_pass(spec, -1, 1.0, 1.0, ctx, spec.last_stage ? 1.0 : 0.0);
  ps.decode.ranks = {rank};
  ps.decode.total = rank.t;
  ps.read_rate = {cm_.read_rate(spec.node)};
  return ps;
}

Strategy Planner::place_row() const {
  PlanOptions::PlaceRun place = *o_.place;
  if (std::any_of(place.stages.begin(), place.stages.end(), [](const PlaceStage& st) { return st.last < st.first; })) {
    // `tessera plan --place`: the layers as the runtime cuts them, --split naming each stage by its first node, or
    // evenly by bytes.
    std::vector<std::string> leaders;
    for (const auto& st : place.stages) leaders.push_back(st.nodes.front());
    std::vector<LayerRange> ranges;
    if (o_.split) {
      ranges = resolve_split(*o_.split, leaders, m_.layer_weight_bytes());
    } else {
      const auto counts = proportional_counts(m_.layer_weight_bytes(), std::vector<double>(leaders.size(), 1.0));
      int64_t first = 0;
      for (size_t i = 0; i < leaders.size(); ++i) {
        if (counts[i] <= 0) fail("--place {}: an even split leaves {} without layers", place.text, leaders[i]);
        ranges.push_back({leaders[i], first, first + counts[i] - 1});
        first += counts[i];
      }
    }
    if (ranges.size() != place.stages.size()) {
      fail("--place {}: the split gives layers to {} of its {} stages", place.text, ranges.size(), place.stages.size());
    }
    for (const auto& r : ranges) {
      auto it = std::find(leaders.begin(), leaders.end(), r.node);
      auto& st = place.stages[static_cast<size_t>(it - leaders.begin())];
      st.first = r.first;
      st.last = r.last;
    }
    std::stable_sort(place.stages.begin(), place.stages.end(),
                     [](const PlaceStage& a, const PlaceStage& b) { return a.first < b.first; });
  }
  std::vector<StageSpec> specs;
  for (size_t i = 0; i < place.stages.size(); ++i) {
    const PlaceStage& st = place.stages[i];
    std::vector<size_t> nodes;
    for (const auto& name : st.nodes) {
      const auto at = c_.find(name);
      if (!at) fail("--place {}: the plan has no node {}", place.text, name);
      nodes.push_back(*at);
    }
    StageSpec spec{nodes.front(), st.first, st.last, i == 0, i + 1 == place.stages.size()};
    if (nodes.size() > 1) spec.group = cm_.make_group(nodes, st.mode, st.shares, st.ep_redundancy);
    specs.push_back(std::move(spec));
  }
  Strategy s = evaluate_groups(fmt::format("your --place {}", place.text), StrategyKind::UserSplit, specs);
  // The user's layout runs as given (the groups link over --workers with the key).
  s.runnable = true;
  s.blocked.clear();
  return s;
}

}  // namespace tessera::plan::detail
