// The planner's internals (planner.h is the interface): the Planner class, whose rows are built in planner.cpp
// (local, pipelines, replicas, requantized) and planner_parallel.cpp (tensor/expert parallel groups, TP x PP).
#pragma once

#include <fmt/format.h>

#include <optional>
#include <string>
#include <vector>

#include "plan/cost_model.h"
#include "plan/planner.h"

namespace tessera::plan::detail {

// "7" or "0-13".
inline std::string range_text(int64_t first, int64_t last) {
  return first == last ? std::to_string(first) : fmt::format("{}-{}", first, last);
}

inline StrategyKind kind_of(ParallelMode m) {
  switch (m) {
    case ParallelMode::Tensor:
      return StrategyKind::TensorParallel;
    case ParallelMode::Expert:
      return StrategyKind::ExpertParallel;
    case ParallelMode::TensorExpert:
      return StrategyKind::TensorExpertParallel;
  }
  return StrategyKind::TensorParallel;
}

inline std::vector<ParallelMode> modes_for(const ModelCost& m) {
  if (!m.config.is_moe()) return {ParallelMode::Tensor};
  return {ParallelMode::Tensor, ParallelMode::Expert, ParallelMode::TensorExpert};
}

class Planner {
 public:
  Planner(const ModelCost& m, const Cluster& c, const PlanOptions& o, const PlanConstants& k)
      : m_(m), c_(c), o_(o), k_(k), cm_(m, c, k) {}

  Plan run();

 private:
  Strategy evaluate_stages(std::string name, StrategyKind kind, const std::vector<StageSpec>& specs,
                           const CostModel& cm, const Workload& w) const;
  Strategy single(size_t node, const CostModel& cm, const Workload& w) const;
  // Layers over `nodes` (in ring order) in proportion to read bandwidth, capped by each node's memory; nullopt with
  // a reason when a node would get no layer.
  std::optional<std::vector<StageSpec>> proportional_split(const std::vector<size_t>& nodes, std::string& reason) const;
  std::vector<std::vector<size_t>> subsets() const;
  std::vector<size_t> ring_order(std::vector<size_t> nodes) const;
  std::optional<Strategy> replicas() const;
  // A strategy over group stages (tensor/expert parallel, TP x PP).
  Strategy evaluate_groups(std::string name, StrategyKind kind, const std::vector<StageSpec>& specs) const;
  // A stage of one node among groups (--place), as a ParallelStage of one rank: its pass, no collectives.
  ParallelStage single_stage(const StageSpec& spec, double ctx) const;
  // The best group of each mode and size over the sets that include the head; reasons for those that cannot be cut.
  std::vector<Strategy> parallel_rows(const std::vector<std::vector<size_t>>& sets,
                                      std::vector<Skipped>& skipped) const;
  // Tensor-parallel groups of equal size as pipeline stages, the best for each node count (never runnable yet).
  std::vector<Strategy> tensor_pipeline_rows(const std::vector<std::vector<size_t>>& sets) const;
  // The run's own pipeline of rank groups under mpirun --pp (PlanOptions::run), "your --tp 2 --pp 2".
  Strategy run_pipeline_row() const;
  // The user's --place layout (PlanOptions::place): each stage's slowest rank and collectives, the hops between.
  Strategy place_row() const;
  // Shares in proportion to the nodes' read bandwidth (empty when they are equal within 1%).
  std::vector<double> speed_shares(const std::vector<size_t>& nodes) const;
  // The rows: of a cluster (every subset), or of the ranks of an mpirun. The user's row, if any.
  std::optional<size_t> cluster_rows(Plan& plan) const;
  std::optional<size_t> mpi_rows(Plan& plan) const;
  // The choice among the rows, and the explanations.
  void choose(Plan& plan, std::optional<size_t> user) const;
  std::vector<Strategy> requant_rows() const;
  std::vector<std::string> names(const std::vector<size_t>& nodes) const;
  static double overflow(const Strategy& s);

  const ModelCost& m_;
  const Cluster& c_;
  const PlanOptions& o_;
  PlanConstants k_;
  CostModel cm_;
};

}  // namespace tessera::plan::detail
