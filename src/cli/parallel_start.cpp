// The start-up measurements of a --tp/--ep run: the all-reduce sweep, and every rank's probe taken at the same time,
// so that ranks of one machine measure its memory while the others read it too.
#include "cli/parallel_start.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "collective/sweep.h"
#include "hw/probe.h"
#include "plan/local_node.h"
#include "util/log.h"

namespace tessera {
namespace {

// One rank's report, as floats (the communicator gathers floats): its machine (a 64-bit hash in 16-bit pieces,
// exact in a float), threads, probe figures, free memory in MiB, and up to kMaxCpus of the CPUs it may use.
constexpr size_t kMaxCpus = 64;
constexpr size_t kFields = 10 + kMaxCpus;

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

}  // namespace

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
  if (comm.rank() == 0) log_info("collectives: {}", plan::collectives_text(run->collectives));
  if (!o.profile) return run;

  if (comm.rank() == 0) log_info("plan: probing every rank at once for about {:.1f} s", o.probe_seconds);
  ProbeOptions po;
  po.threads = o.threads;
  po.seconds = o.probe_seconds;
  // A smaller buffer than a plain probe's (1 GiB): every rank allocates its own at start, and 256 MiB still reads
  // well past the caches of the machines this runs on.
  po.buffer_bytes = uint64_t{256} << 20;
  const ProbeResult probe = probe_node(po);
  const std::string machine = machine_id();
  const uint64_t hash = machine.empty() ? 0 : fnv1a(machine);
  const std::vector<int> cpus = affinity_cpus();
  std::vector<float> mine(kFields, -1.0f);
  for (size_t i = 0; i < 4; ++i) mine[i] = static_cast<float>((hash >> (16 * i)) & 0xffff);
  mine[4] = static_cast<float>(o.threads);
  mine[5] = static_cast<float>(probe.mem_read_gbps);
  mine[6] = static_cast<float>(probe.int8_gops);
  mine[7] = static_cast<float>(probe.f32_gflops);
  mine[8] = static_cast<float>(static_cast<double>(probe.mem_available_bytes) / 1048576.0);
  mine[9] = static_cast<float>(std::min(cpus.size(), kMaxCpus));
  for (size_t i = 0; i < std::min(cpus.size(), kMaxCpus); ++i) mine[10 + i] = static_cast<float>(cpus[i]);
  std::vector<float> all;
  comm.gather(mine, all, 0);
  if (comm.rank() != 0) return run;

  // Ranks of one machine share its memory: each node carries the machine's read bandwidth (the sum of what its
  // ranks measured together) and its free memory, which the cost model divides among the ranks on it.
  std::map<uint64_t, double> machine_read;
  std::map<uint64_t, int> machine_count;
  const int n = comm.size();
  auto field = [&](int r, size_t f) { return static_cast<double>(all[static_cast<size_t>(r) * kFields + f]); };
  auto hash_of = [&](int r) {
    uint64_t h = 0;
    for (size_t i = 0; i < 4; ++i) h |= static_cast<uint64_t>(field(r, i)) << (16 * i);
    return h;
  };
  for (int r = 0; r < n; ++r) {
    machine_read[hash_of(r)] += field(r, 5);
    ++machine_count[hash_of(r)];
  }
  for (int r = 0; r < n; ++r) {
    const uint64_t h = hash_of(r);
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
    for (size_t i = 0; i < static_cast<size_t>(field(r, 9)); ++i)
      node.cpus.push_back(static_cast<int>(field(r, 10 + i)));
    node.threads = static_cast<int>(field(r, 4));
    run->ranks.push_back(std::move(node));
  }
  return run;
}

}  // namespace tessera
