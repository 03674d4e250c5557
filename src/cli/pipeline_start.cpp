// The start of a pipeline of rank groups under mpirun --pp: the stages' layers and the point-to-point between them.
#include "cli/pipeline_start.h"

#include <fmt/format.h>

#include "collective/sweep.h"
#include "model/model_profile.h"
#include "model/shard.h"
#include "plan/split_spec.h"
#include "util/error.h"
#include "util/log.h"

namespace tessera {
namespace {

// "4 B 6 us, 16 KiB 9 us, 1.0 MiB 180 us (fit: 6 us + 5.9 GB/s)"
std::string p2p_text(const plan::CollectiveProfile& c) {
  std::string t;
  for (const auto& s : c.samples) {
    t += fmt::format("{}{} {}", t.empty() ? "" : ", ", plan::bytes_text(s.bytes), plan::seconds_text(s.seconds));
  }
  const std::string bw =
      c.seconds_per_byte > 0 ? fmt::format(" + {:.2f} GB/s", 1e-9 / c.seconds_per_byte) : std::string();
  return fmt::format("{} (fit: {}{})", t, plan::seconds_text(c.latency_s), bw);
}

}  // namespace

PipelineCut cut_pipeline(collective::Communicator& world, const ModelOptions& o, const ModelWeights& w, int group,
                         int threads) {
  const int stages = o.pp;
  PipelineCut cut;
  // Machine ids first (cheap): alike stages need no probe unless the plan is printed.
  cut.reports = report_ranks(world, threads, false, 0);
  const auto machines = [&] {
    std::vector<uint64_t> ids;
    for (int r = 0; r < cut.reports.ranks(); ++r) ids.push_back(cut.reports.machine(r));
    return ids;
  };
  if (o.profile_ranks || !plan::stages_alike(machines(), stages, group)) {
    cut.reports = report_ranks(world, threads, true, 0.5);
  }
  std::vector<double> rates;
  for (int r = 0; r < cut.reports.ranks(); ++r) rates.push_back(cut.reports.read_gbps(r) * 1e9);
  const std::vector<double> shares = o.tp_shares.empty() ? std::vector<double>() : parse_shares(o.tp_shares, group);
  const ModelConfig& c = w.config();
  plan::StageSplit split;
  try {
    split = plan::split_rank_stages(profile_model(w.source(), c).layer_bytes, machines(), rates, stages, group, shares);
  } catch (const Error& e) {
    fail("--pp {}: {} has {} layers: {}", stages, o.model, c.n_layer, e.what());
  }
  cut.reason = split.reason;
  int64_t first = 0;
  for (int s = 0; s < stages; ++s) {
    const int64_t n = split.counts[static_cast<size_t>(s)];
    cut.ranges.push_back({first, first + n});
    first += n;
  }
  return cut;
}

std::shared_ptr<const plan::ParallelRun> finish_pipeline(collective::Communicator& world, const PipelineCut& cut,
                                                         std::shared_ptr<const plan::ParallelRun> stage_run,
                                                         int group) {
  const auto sizes = collective::default_p2p_bytes();
  const auto points = collective::sweep_point_to_point(world, group, sizes);
  if (world.rank() != 0) return nullptr;
  auto run = stage_run ? std::make_shared<plan::ParallelRun>(*stage_run) : std::make_shared<plan::ParallelRun>();
  run->pp = static_cast<int>(cut.ranges.size());
  for (const auto& r : cut.ranges) run->stage_layers.emplace_back(r.begin, r.end - 1);
  run->split = cut.reason;
  if (cut.reports.probed) run->ranks = cut.reports.nodes();
  if (!points.empty()) {
    std::vector<plan::CollectiveSample> samples;
    for (const auto& p : points) samples.push_back({static_cast<double>(p.bytes), p.seconds});
    run->p2p = plan::fit_collectives(2, std::move(samples), "point-to-point measured over MPI at start");
    log_info("between stages: one message of {}", p2p_text(run->p2p));
  }
  return run;
}

}  // namespace tessera
