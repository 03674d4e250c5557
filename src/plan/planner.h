// The planner: compares local, single nodes, pipelines over node subsets, replicas, smaller quantizations on one node,
// a user's --split and (previews) tensor/expert parallel; picks the fastest plan that fits and says why.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "plan/cluster.h"
#include "plan/cost_model.h"
#include "plan/model_shape.h"
#include "plan/plan_constants.h"
#include "plan/split_spec.h"

namespace tessera::plan {

enum class StrategyKind { Local, Single, Pipeline, Replicas, TensorParallel, ExpertParallel, Requant, UserSplit };
std::string_view strategy_kind_name(StrategyKind k);  // "local", "single", "pipeline", ...

struct NodeMemory {
  std::string node;
  std::string layers;  // "0-13", "all", "experts 1/3", ...
  uint64_t weights = 0, kv_cache = 0, buffers = 0;
  uint64_t packed = 0;  // the packed copy of the weights on a node that packs at load (--repack)
  uint64_t needs = 0;
  uint64_t has = 0;  // available after the headroom constant
  bool fits() const { return needs <= has; }
};

struct Strategy {
  std::string name;
  StrategyKind kind = StrategyKind::Local;
  std::vector<std::string> nodes;
  std::vector<LayerRange> stages;  // pipelines, local and single: the layer ranges in ring order
  std::vector<int64_t> sequences;  // replicas: the concurrent sequences each copy decodes
  std::vector<NodeMemory> memory;  // one entry per node
  bool feasible = false;
  bool runnable = true;     // false: needs another file (requant) or a runtime that does not exist yet (preview)
  std::string model_label;  // the model this row predicts (differs for requant rows)
  uint64_t model_bytes = 0;
  Prediction pred;
  std::string bottleneck;  // "memory bandwidth (decode)"
  std::string why;         // one sentence
};

struct Skipped {
  std::vector<std::string> nodes;
  std::string reason;
};

struct PlanOptions {
  Workload workload;
  bool distribute = false;   // never choose a single node
  bool preview = false;      // also predict tensor and expert parallel (not yet in the runtime; never chosen)
  bool all_subsets = false;  // list every pipeline subset, not only the best per node count
  bool requant_advice = true;
  std::optional<SplitSpec> split;  // the user's override
};

struct Plan {
  std::string model_label;
  uint64_t model_bytes = 0;
  uint64_t decode_bytes_per_token = 0;
  Workload workload;
  std::vector<Strategy> strategies;
  std::optional<size_t> chosen;  // none: nothing that may be chosen fits
  std::optional<size_t> best;    // the planner's own choice (differs from chosen with --split)
  std::string decision;          // what to do and why, in a sentence or two
  std::vector<std::string> advice;
  std::vector<Skipped> skipped;  // node subsets not worth a row, with the reason
};

// Throws Error for a workload that cannot run (prompt + generation beyond the context, zero concurrency) and for a
// --split that names unknown nodes or leaves gaps or overlaps. A plan where nothing fits is returned, not thrown:
// its rows show what each strategy needs and what each node has.
Plan make_plan(const ModelCost& model, const Cluster& cluster, const PlanOptions& options,
               const PlanConstants& constants = {});

}  // namespace tessera::plan
