// The start-up measurements of a --tp/--ep run: the all-reduce sweep, and every rank's probe taken at the same time,
// so that ranks of one machine measure its memory while the others read it too.
#include "cli/parallel_start.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <span>

#include "collective/sweep.h"
#include "hw/probe.h"
#include "plan/local_node.h"
#include "util/log.h"

namespace tessera {
namespace {

// One rank's report, as floats (the communicator sums floats): its machine (a 64-bit hash in 16-bit pieces,
// exact in a float), threads, probe figures, free memory in MiB, and up to kMaxCpus of the CPUs it may use.
constexpr size_t kMaxCpus = 64;
constexpr size_t kFields = 10 + kMaxCpus;

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

}  // namespace

int RankReports::ranks() const { return static_cast<int>(all.size() / kFields); }

uint64_t RankReports::machine(int rank) const {
  uint64_t h = 0;
  for (size_t i = 0; i < 4; ++i) {
    h |= static_cast<uint64_t>(all[static_cast<size_t>(rank) * kFields + i]) << (16 * i);
  }
  return h;
}

double RankReports::read_gbps(int rank) const { return all[static_cast<size_t>(rank) * kFields + 5]; }

RankReports report_ranks(collective::Communicator& comm, int threads, bool probe, double probe_seconds) {
  RankReports out;
  out.probed = probe;
  ProbeResult result;
  if (probe) {
    if (comm.rank() == 0) log_info("plan: probing every rank at once for about {:.1f} s", probe_seconds);
    ProbeOptions po;
    po.threads = threads;
    po.seconds = probe_seconds;
    // A smaller buffer than a plain probe's (1 GiB): every rank allocates its own at start, and 256 MiB still reads
    // well past the caches of the machines this runs on.
    po.buffer_bytes = uint64_t{256} << 20;
    po.machine_rate = false;  // the ranks' reads at the same time are the machine's, summed below
    result = probe_node(po);
  }
  const std::string machine = machine_id();
  const uint64_t hash = machine.empty() ? 0 : fnv1a(machine);
  const std::vector<int> cpus = affinity_cpus();
  // Each rank fills its own slot of zeros and the sum is every report, exactly, on every rank.
  out.all.assign(kFields * static_cast<size_t>(comm.size()), 0.0f);
  const std::span<float> mine(out.all.data() + kFields * static_cast<size_t>(comm.rank()), kFields);
  std::fill(mine.begin(), mine.end(), -1.0f);
  for (size_t i = 0; i < 4; ++i) mine[i] = static_cast<float>((hash >> (16 * i)) & 0xffff);
  mine[4] = static_cast<float>(threads);
  mine[5] = static_cast<float>(result.mem_read_gbps);
  mine[6] = static_cast<float>(result.int8_gops);
  mine[7] = static_cast<float>(result.f32_gflops);
  mine[8] = static_cast<float>(static_cast<double>(result.mem_available_bytes) / 1048576.0);
  mine[9] = static_cast<float>(std::min(cpus.size(), kMaxCpus));
  for (size_t i = 0; i < std::min(cpus.size(), kMaxCpus); ++i) mine[10 + i] = static_cast<float>(cpus[i]);
  comm.all_reduce_sum(out.all);
  return out;
}

std::vector<plan::NodeProfile> RankReports::nodes() const {
  // Ranks of one machine share its memory: each node carries the machine's read bandwidth (the sum of what its
  // ranks measured together) and its free memory, which the cost model divides among the ranks on it.
  std::map<uint64_t, double> machine_read;
  std::map<uint64_t, int> machine_count;
  const int n = ranks();
  auto field = [&](int r, size_t f) { return static_cast<double>(all[static_cast<size_t>(r) * kFields + f]); };
  for (int r = 0; r < n; ++r) {
    machine_read[machine(r)] += field(r, 5);
    ++machine_count[machine(r)];
  }
  std::vector<plan::NodeProfile> out;
  for (int r = 0; r < n; ++r) {
    const uint64_t h = machine(r);
    ProbeResult p;
    p.mem_read_gbps = h != 0 ? machine_read[h] : field(r, 5);
    p.int8_gops = field(r, 6);
    p.f32_gflops = field(r, 7);
    p.mem_available_bytes = static_cast<uint64_t>(field(r, 8) * 1048576.0);
    p.cores = static_cast<int>(field(r, 9));
    const int sharing = h != 0 ? machine_count[h] : 1;
    plan::NodeProfile node = plan::node_from_probe(
        p, fmt::format("rank{}", r),
        sharing > 1 ? fmt::format("probe at start; {} ranks on its machine, their reads summed", sharing)
                    : std::string("probe at start"));
    if (h != 0) node.machine = fmt::format("{:016x}", h);
    node.machine_read_gbps = p.mem_read_gbps;
    for (size_t i = 0; i < static_cast<size_t>(field(r, 9)); ++i)
      node.cpus.push_back(static_cast<int>(field(r, 10 + i)));
    node.threads = static_cast<int>(field(r, 4));
    out.push_back(std::move(node));
  }
  return out;
}

std::shared_ptr<const plan::ParallelRun> start_parallel(collective::Communicator& comm, const ParallelStartOptions& o) {
  auto run = std::make_shared<plan::ParallelRun>();
  run->mode = o.mode;
  run->shares = o.shares;
  run->ep_redundancy = o.ep_redundancy;
  const auto floats = collective::default_sweep_floats();
  std::vector<plan::CollectiveSample> samples;
  for (const auto& p : collective::sweep_all_reduce(comm, floats)) {
    samples.push_back({static_cast<double>(p.bytes), p.seconds});
  }
  run->collectives =
      plan::fit_collectives(comm.size(), std::move(samples), fmt::format("measured over {} at start", o.backend));
  if (comm.rank() == 0 && o.show) log_info("collectives: {}", plan::collectives_text(run->collectives));
  if (!o.profile) return run;
  const RankReports reports = report_ranks(comm, o.threads, true, o.probe_seconds);
  if (comm.rank() == 0) run->ranks = reports.nodes();
  return run;
}

}  // namespace tessera
