// A layer placement by node name (`--split`): layer ranges ("0-10@a,11-21@b") or proportions ("a:1,b:2").
// The planner checks a user's split against its own choice; the distributed runtime reuses the same parser.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tessera::plan {

struct SplitPart {
  std::string node;
  int64_t first = -1;  // ranges: first and last layer, inclusive
  int64_t last = -1;
  double share = 0;  // proportions: the node's weight
};

struct SplitSpec {
  enum class Kind { Ranges, Proportions };
  Kind kind = Kind::Ranges;
  std::vector<SplitPart> parts;  // as written
  std::string text;
};

// A contiguous run of layers on one node, in pipeline order.
struct LayerRange {
  std::string node;
  int64_t first = 0;  // inclusive
  int64_t last = 0;   // inclusive
  int64_t count() const { return last - first + 1; }
};

// Syntax only. Throws Error naming the bad item: "--split: '3-x@b': ...".
SplitSpec parse_split(std::string_view text);

// Checks a split against the nodes and the model and turns it into ranges in layer order. Throws Error for an
// unknown node (listing the valid names), a node named twice, a range outside the model (naming the layer count),
// layers placed twice (overlap) or not at all (gap), a zero or negative share, or a share so small that it rounds
// to no layers. layer_bytes has one entry per layer; proportions split the bytes, not the layer count.
std::vector<LayerRange> resolve_split(const SplitSpec& spec, std::span<const std::string> node_names,
                                      std::span<const uint64_t> layer_bytes);

// Cuts layers into contiguous runs whose byte totals follow the weights as closely as whole layers allow (each
// boundary at the layer edge nearest its target). A run may come out empty when its weight is small; callers
// decide what that means. Returns the layer count of each run.
std::vector<int64_t> proportional_counts(std::span<const uint64_t> layer_bytes, std::span<const double> weights);

// The layers of a pipeline's stages (mpirun --pp) in contiguous runs: by bytes alone when the stages are alike
// (their speeds within `alike` of each other, or equal), else by bytes weighted with each stage's speed (a stage
// twice as fast gets about twice the bytes), so that every stage takes about as long. Why, in `reason`, for the
// table at load. Throws Error when a stage would get no layer.
struct StageSplit {
  std::vector<int64_t> counts;  // layers of each stage, in pipeline order
  bool by_speed = false;
  std::string reason;
};
StageSplit split_by_speed(std::span<const uint64_t> layer_bytes, std::span<const double> speeds, double alike = 0.10);

// The ranks of an mpirun --pp: world rank r is rank r % group of stage stages - 1 - r / group. Whether every stage
// runs on the same machines (the same machine ids, as many ranks on each; an id of 0 is unknown and never alike).
bool stages_alike(std::span<const uint64_t> rank_machines, int stages, int group);
// The stages' layers from the ranks' reports: by bytes when the stages are alike, else split_by_speed over each
// stage's speed, its slowest rank's read rate over that rank's fraction of the stage (`shares`, empty: equal).
StageSplit split_rank_stages(std::span<const uint64_t> layer_bytes, std::span<const uint64_t> rank_machines,
                             std::span<const double> rank_read_bps, int stages, int group,
                             std::span<const double> shares = {});

// "0-13@a,14-27@b": the ranges in --split syntax.
std::string format_ranges(std::span<const LayerRange> ranges);

}  // namespace tessera::plan
