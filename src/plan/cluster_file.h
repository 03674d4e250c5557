// cluster.json: hypothetical (or recorded) nodes and links for `tessera plan --cluster`, so users can plan a
// cluster they do not have yet. The format is documented in docs/planner.md.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include "plan/cluster.h"
#include "plan/plan_constants.h"

namespace tessera::plan {

// Parses and validates the text; `where` (the file name) starts every error message. Unknown keys are errors (a
// typo would otherwise silently fall back to a default). Nodes given only "cores" get compute rates from the
// per-core constants.
Cluster parse_cluster_json(std::string_view text, const std::string& where, const PlanConstants& constants = {});
Cluster load_cluster_file(const std::filesystem::path& path, const PlanConstants& constants = {});

}  // namespace tessera::plan
