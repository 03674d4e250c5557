// `--place`: which nodes hold each pipeline stage, in order, where a stage may be a tensor- or expert-parallel group
// of nodes: "local,tp(a,b)" or "tp(local,a),tp(b,c)" (docs/parallel.md, "Pipelines of groups over worker links").
#pragma once

#include <span>
#include <string>
#include <vector>

namespace tessera {

struct PlacedStage {
  std::vector<std::string> members;  // the first leads (the stage's endpoint, rank 0 of its group)
  bool tp = false;                   // a group: tp(...) or ep(...); one member: neither
  bool ep = false;
  bool group() const { return members.size() > 1; }
  const std::string& leader() const { return members.front(); }
  std::string text() const;  // as written: "b" or "tp(b,c)"
};

// Parses the text against the worker names (and "local", the head). Throws Error for a syntax error, a name that is
// neither (listing the valid ones), a node named twice, a group of one, or "local" anywhere but first in its group.
std::vector<PlacedStage> parse_place(const std::string& text, std::span<const std::string> workers);

}  // namespace tessera
