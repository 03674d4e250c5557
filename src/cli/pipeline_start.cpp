// The start of a pipeline of rank groups under mpirun --pp: the stages' layers and the point-to-point between them.
#include "cli/pipeline_start.h"

#include <fmt/format.h>

#include <algorithm>

#include "collective/sweep.h"
#include "model/model_profile.h"
#include "model/shard.h"
#include "plan/split_spec.h"
#include "util/error.h"
#include "util/log.h"

namespace tessera {
namespace {

// The world ranks of a stage, in its group's rank order.
std::vector<int> stage_ranks(int stage, int stages, int group) {
  std::vector<int> out;
  for (int j = 0; j < group; ++j) out.push_back((stages - 1 - stage) * group + j);
  return out;
}

// Whether every stage runs on the same kinds of machines (the same machine ids, as many ranks on each): then their
// speeds differ by the probe's noise only.
bool machines_alike(const RankReports& r, int stages, int group) {
  std::vector<uint64_t> first;
  for (int s = 0; s < stages; ++s) {
    std::vector<uint64_t> ids;
    for (int rank : stage_ranks(s, stages, group)) ids.push_back(r.machine(rank));
    if (std::find(ids.begin(), ids.end(), uint64_t{0}) != ids.end()) return false;
    std::sort(ids.begin(), ids.end());
    if (s == 0) first = ids;
    if (ids != first) return false;
  }
  return true;
}

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
  const bool alike = machines_alike(cut.reports, stages, group);
  if (o.profile_ranks || !alike) cut.reports = report_ranks(world, threads, true, 0.5);
  const ModelConfig& c = w.config();
  const ModelProfile profile = profile_model(w.source(), c);
  std::vector<int64_t> counts;
  if (alike) {
    const std::vector<double> even(static_cast<size_t>(stages), 1.0);
    counts = plan::proportional_counts(profile.layer_bytes, even);
    cut.reason = "by bytes: every stage runs on the same machines";
  } else {
    // A stage's speed: its group finishes a layer when its slowest share does (shares in proportion, or equal).
    const std::vector<double> shares =
        o.tp_shares.empty() ? std::vector<double>(static_cast<size_t>(group), 1.0) : parse_shares(o.tp_shares, group);
    double total = 0;
    for (double s : shares) total += s;
    std::vector<double> speeds;
    for (int s = 0; s < stages; ++s) {
      double speed = INFINITY;
      const auto ranks = stage_ranks(s, stages, group);
      for (size_t j = 0; j < ranks.size(); ++j) {
        speed = std::min(speed, cut.reports.read_gbps(ranks[j]) * 1e9 * total / shares[j]);
      }
      speeds.push_back(speed);
    }
    const plan::StageSplit split = plan::split_by_speed(profile.layer_bytes, speeds);
    counts = split.counts;
    cut.reason = split.reason;
  }
  int64_t first = 0;
  for (int s = 0; s < stages; ++s) {
    const int64_t n = counts[static_cast<size_t>(s)];
    if (n <= 0) fail("--pp {}: {} has {} layers, too few for {} stages", stages, o.model, c.n_layer, stages);
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
