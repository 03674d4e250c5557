// `--place`: which nodes hold each pipeline stage, in order, where a stage may be a tensor- or expert-parallel group
// of nodes: "local,tp(a,b)" or "tp(local,a),tp(b,c)", a member's share of its group after a colon, "tp(local:2,a)"
// (docs/parallel.md, "Pipelines of groups over worker links").
#pragma once

#include <span>
#include <string>
#include <vector>

#include "plan/planner.h"

namespace tessera {

struct PlacedStage {
  std::vector<std::string> members;  // the first leads (the stage's endpoint, rank 0 of its group)
  bool tp = false;                   // a group: tp(...) or ep(...); one member: neither
  bool ep = false;
  std::vector<double> shares = {};  // by member, when any is given ("tp(local:2,a)": 2, 1); empty: equal
  bool group() const { return members.size() > 1; }
  std::string shares_text() const;  // "2,1" (as --tp-shares), or "" for equal shares
  const std::string& leader() const { return members.front(); }
  std::string text() const;  // as written: "b" or "tp(b,c)"
};

// Parses the text against the worker names (and "local", the head). Throws Error for a syntax error, a name that is
// neither (listing the valid ones), a node named twice, a group of one, "local" anywhere but first in its group, or a
// share that is not a positive number or belongs to a stage of one node.
std::vector<PlacedStage> parse_place(const std::string& text, std::span<const std::string> workers);

// The --place layout over the --workers text in the planner's terms: each stage's nodes, mode and shares, and
// ep_redundancy for its ep groups; the layers are left for the plan to cut as build_pipeline does.
std::vector<plan::PlaceStage> place_for_plan(const std::string& text, std::span<const std::string> workers,
                                             double ep_redundancy);

}  // namespace tessera
