// --place in the planner's terms: the parsed stages as plan::PlaceStage (kept apart from place_spec so that the
// parser builds alone, for its fuzz target, without the planner).
#pragma once

#include <span>
#include <string>
#include <vector>

#include "plan/planner.h"

namespace tessera {

// The --place layout over the --workers text in the planner's terms: each stage's nodes, mode and shares, and
// ep_redundancy for its ep groups; the layers are left for the plan to cut as build_pipeline does.
std::vector<plan::PlaceStage> place_for_plan(const std::string& text, std::span<const std::string> workers,
                                             double ep_redundancy);

}  // namespace tessera
