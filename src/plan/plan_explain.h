// The sentences of a plan: each strategy's bottleneck and why, and the plan's decision and advice. Kept apart from
// the planner's arithmetic so the wording can change without touching the choice.
#pragma once

#include <optional>

#include "plan/planner.h"

namespace tessera::plan {

// Sets s.bottleneck and s.why from its prediction and memory.
void explain_strategy(Strategy& s, const ModelCost& model, const Cluster& cluster, const CostModel& cm,
                      const Workload& w);
// Sets plan.decision and plan.advice from the evaluated strategies and the choice.
void explain_plan(Plan& plan, const ModelCost& model, const Cluster& cluster, const PlanOptions& options,
                  std::optional<size_t> user_split, double min_gain);

// Adds to each tensor/expert-parallel row's why what its collectives cost per decoded token against what its shares
// save on the fastest plain row (local, one node or a pipeline): "Loses to local: 44 all-reduces x 150 us (...) + 2
// small collectives = 6.7 ms per token > the 4.1 ms its shares save on local's 25.0 ms per token."
void explain_tradeoffs(Plan& plan);

// "4.36 GiB"
std::string gib_text(uint64_t bytes);

}  // namespace tessera::plan
