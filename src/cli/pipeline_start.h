// Under mpirun --pp, on every rank: the layers of each stage, cut by bytes when the stages' machines are alike and by
// each stage's measured speed when they differ (the same cut on every rank, from reports every rank holds alike);
// after the cut, one message between peers of adjacent stages timed at a few sizes, and on rank 0 the run the
// planner predicts (plan::ParallelRun with its stages).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "cli/model_options.h"
#include "cli/parallel_start.h"
#include "collective/communicator.h"
#include "model/model_weights.h"

namespace tessera {

struct PipelineCut {
  std::vector<LayerRange> ranges;  // stage 0 first
  std::string reason;              // "by bytes: ...", "by speed: ..."
  RankReports reports;             // every rank's (probed when the plan is printed or the machines differ)
};

// A collective over every rank of the run (world): `group` ranks a stage, world rank r in stage P - 1 - r / group.
// Throws Error when a stage would get no layer.
PipelineCut cut_pipeline(collective::Communicator& world, const ModelOptions& o, const ModelWeights& w, int group,
                         int threads);

// A collective: the point-to-point sweep between stage peers (shown on rank 0); rank 0 gets the run for the plan
// (the stage's collectives from `stage_run`, measured in its own stage; null when a stage is one rank), the others
// nothing.
std::shared_ptr<const plan::ParallelRun> finish_pipeline(collective::Communicator& world, const PipelineCut& cut,
                                                         std::shared_ptr<const plan::ParallelRun> stage_run, int group);

}  // namespace tessera
