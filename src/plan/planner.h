// The planner: compares local, single nodes, pipelines over node subsets, replicas, smaller quantizations on one node,
// tensor/expert-parallel groups (and TP x PP), a user's --split or --tp/--ep run; picks the fastest plan that fits
// and says why.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "plan/cluster.h"
#include "plan/cost_model.h"
#include "plan/model_shape.h"
#include "plan/plan_constants.h"
#include "plan/split_spec.h"

namespace tessera::plan {

enum class StrategyKind {
  Local,
  Single,
  Pipeline,
  Replicas,
  TensorParallel,
  ExpertParallel,
  TensorExpertParallel,
  TensorPipeline,  // tensor-parallel groups as pipeline stages (TP x PP)
  Requant,
  UserSplit,
};
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

// One tensor/expert-parallel group of a strategy and what one decoded token costs on it (the arithmetic the plan
// prints).
struct ParallelStage {
  std::vector<std::string> nodes;  // rank order
  int64_t first = 0, last = -1;
  ParallelMode mode = ParallelMode::Tensor;
  std::vector<double> shares;  // empty: equal
  double ep_redundancy = 0;    // --ep-redundancy
  std::string cuts;            // ParallelLayout::cuts
  CollectiveProfile collectives;
  GroupPass decode;               // one token of one sequence
  std::vector<double> read_rate;  // bytes/s each rank reads at (its node's, shared with ranks on its machine)
};

struct Strategy {
  std::string name;
  StrategyKind kind = StrategyKind::Local;
  std::vector<std::string> nodes;
  std::vector<LayerRange> stages;  // pipelines, local and single: the layer ranges in ring order
  std::vector<int64_t> sequences;  // replicas: the concurrent sequences each copy decodes
  std::vector<NodeMemory> memory;  // one entry per node
  bool feasible = false;
  bool runnable = true;     // false: needs another file (requant), a key, a direct link between workers, or TP x PP
  std::string blocked;      // why a tensor/expert-parallel row cannot run as it is ("" when it can)
  std::string model_label;  // the model this row predicts (differs for requant rows)
  uint64_t model_bytes = 0;
  Prediction pred;
  std::string bottleneck;               // "memory bandwidth (decode)"
  std::string why;                      // one sentence
  std::vector<ParallelStage> parallel;  // tensor/expert-parallel rows: each group
  std::vector<std::string> arithmetic;  // their decode arithmetic, line by line
  bool is_parallel() const { return !parallel.empty(); }
};

struct Skipped {
  std::vector<std::string> nodes;
  std::string reason;
};

// Tensor/expert-parallel rows: off, shown but not runnable (PlanOptions::parallel_blocked says why), or runnable (a
// cluster file's nodes under mpirun, the ranks of an mpirun, or --workers with a cluster key).
enum class ParallelRows { Off, Shown, Runnable };

// A stage of a user's --place layout: one node, or a group of nodes (the first leads) in a mode with its shares.
struct PlaceStage {
  std::vector<std::string> nodes;  // planner names
  ParallelMode mode = ParallelMode::Tensor;
  std::vector<double> shares;  // empty: equal
  double ep_redundancy = 0;    // an ep group's --ep-redundancy
  int64_t first = 0, last = -1;
};

struct PlanOptions {
  Workload workload;
  bool distribute = false;  // never choose a single node
  ParallelRows parallel = ParallelRows::Runnable;
  std::string parallel_blocked;  // with Shown: what the rows need ("--key-file: ...")
  // The nodes are the head and its --workers: a group runs as `--tp N --workers ...` (not mpirun), and a group over
  // two workers that could not reach each other (Cluster::unreachable) cannot run.
  bool over_workers = false;
  bool all_subsets = false;  // list every pipeline subset, not only the best per node count
  bool requant_advice = true;
  std::optional<SplitSpec> split;  // the user's override
  // Under mpirun --tp/--ep: the nodes are the ranks (rank 0 the head). The rows are local and the groups over every
  // rank; `run` is the layout that runs ("your --tp 2"), checked against them like --split.
  bool mpi_ranks = false;
  struct ParallelRun {
    ParallelMode mode = ParallelMode::Tensor;
    std::vector<double> shares;
    double ep_redundancy = kDefaultEpRedundancy;
    // --pp P: the nodes are P stages of N = size / P ranks, world rank r rank r % N of stage P - 1 - r / N, with
    // these layers (first, last) and each stage's collectives as measured in rank 0's (the ranks of a stage all
    // swept at once); hops between stages cost the cluster's default link (the measured point-to-point).
    int pp = 1;
    std::vector<std::pair<int64_t, int64_t>> stage_layers = {};
    std::optional<CollectiveProfile> stage_collectives = std::nullopt;
  };
  std::optional<ParallelRun> run;
  // Over --workers: the user's --place layout (`text` as typed), predicted as its own row ("your --place ...").
  struct PlaceRun {
    std::string text;
    std::vector<PlaceStage> stages;
  };
  std::optional<PlaceRun> place;
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
