// `run`, `bench` and `serve` with --workers and no layout of the user's (--split, --tp, --ep, --spare): the planner's
// choice (Plan::best) decides: a tensor/expert-parallel group over the workers when it picks one; its pipeline when
// the even split does not fit; else (one machine, or a pipeline where the even split fits too) the even pipeline as
// before, with the plan's sentence when one machine would be faster.
#pragma once

#include <optional>
#include <string>

#include "cli/cluster_options.h"
#include "cli/model_options.h"
#include "plan/plan_cli.h"

namespace tessera {

// True when the planner may choose the layout: --workers given, no --split/--tp/--ep/--pp/--spare, one pipeline.
bool plan_may_choose(const ModelOptions& mo, const ClusterOptions& co);

// Plans `request` (the nodes profiled live, or --plan-cluster's file), then sets mo/co to the planner's choice: a
// group (mo.tp/mo.ep, the workers as ranks, as --tp N would), or a pipeline (co.split) in place of an even split that
// does not fit. Returns the plan's text and
// one line naming the choice and the top rows' predicted speeds, for standard error. A plan that cannot be made
// leaves the options as they are (the even pipeline) and says why in the text.
std::string follow_plan(plan::CliPlanRequest request, ModelOptions& mo, ClusterOptions& co);

}  // namespace tessera
