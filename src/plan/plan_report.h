// A plan for people (a table, each strategy's reason, the decision) and for scripts (JSON of a stable shape, see
// docs/planner.md). `plan` prints it; run, bench and serve will at start.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "plan/cluster.h"
#include "plan/planner.h"

namespace tessera::plan {

nlohmann::ordered_json plan_json(const Plan& plan, const ModelCost& model, const Cluster& cluster,
                                 const PlanConstants& constants = {});
std::string plan_text(const Plan& plan, const ModelCost& model, const Cluster& cluster);

}  // namespace tessera::plan
