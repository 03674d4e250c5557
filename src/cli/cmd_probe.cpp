// `tessera probe [--json] [-t N] [--seconds S]`: this machine's memory bandwidth, int8/f32 compute rates, cores,
// memory, CPU and kernel ISA, for people (text) or scripts and the planner (--json).
#include <fmt/format.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/table.h"
#include "hw/probe.h"
#include "util/log.h"

namespace tessera {
namespace {

struct ProbeArgs {
  ProbeOptions options;
  uint64_t buffer_mib = 0;
  bool json = false;
};

nlohmann::ordered_json batch_rates_json(const std::vector<BatchRate>& rates) {
  auto out = nlohmann::ordered_json::array();
  for (const BatchRate& b : rates) out.push_back({{"tokens", b.tokens}, {"fraction", b.fraction}});
  return out;
}

nlohmann::ordered_json probe_json(const ProbeResult& r) {
  return {{"threads", r.threads},
          {"mem_read_gbps", r.mem_read_gbps},
          {"mem_read_best_gbps", r.mem_read_best_gbps},
          {"mem_read_gbps_1t", r.mem_read_gbps_1t},
          {"machine_read_gbps", r.machine_read_gbps},
          {"machine_cpus", r.machine_cpus},
          {"int8_gops", r.int8_gops},
          {"f32_gflops", r.f32_gflops},
          {"batch_rates", batch_rates_json(r.batch_rates)},
          {"cores", r.cores},
          {"mem_total_bytes", r.mem_total_bytes},
          {"mem_available_bytes", r.mem_available_bytes},
          {"cpu", r.cpu},
          {"isa", r.isa}};
}

void print_text(const ProbeResult& r) {
  fmt::print("cpu:          {}\n", r.cpu);
  fmt::print("cores:        {}\n", r.cores);
  fmt::print("kernel isa:   {}\n", r.isa);
  fmt::print("memory:       {} total, {} available\n", human_bytes(r.mem_total_bytes),
             human_bytes(r.mem_available_bytes));
  fmt::print("memory read:  {:.2f} GB/s with {} thread(s) (best pass {:.2f}), {:.2f} GB/s with 1\n", r.mem_read_gbps,
             r.threads, r.mem_read_best_gbps, r.mem_read_gbps_1t);
  if (r.machine_read_gbps > 0) {
    fmt::print("machine read: {:.2f} GB/s with a reader on each of its {} CPUs (what nodes on this machine share)\n",
               r.machine_read_gbps, r.machine_cpus);
  } else {
    fmt::print("machine read: not measured (a CPU of this machine cannot be used by this process)\n");
  }
  std::string ramp;
  for (const BatchRate& b : r.batch_rates)
    ramp += fmt::format("{}{}: {:.2f}", ramp.empty() ? "" : ", ", b.tokens, b.fraction);
  fmt::print("matmul ramp:  {} (tokens per pass: rate over {}'s, Q4_K, 1 thread)\n", ramp,
             r.batch_rates.empty() ? 0 : r.batch_rates.back().tokens);
  fmt::print("int8 dot:     {:.1f} GOPS with {} thread(s)\n", r.int8_gops, r.threads);
  fmt::print("f32 fma:      {:.1f} GFLOPS with {} thread(s)\n", r.f32_gflops, r.threads);
}

int run_probe(ProbeArgs& a) {
  a.options.buffer_bytes = a.buffer_mib << 20;
  log_info("probe: measuring for about {:.1f} s", a.options.seconds);
  const ProbeResult r = probe_node(a.options);
  if (a.json) {
    fmt::print("{}\n", probe_json(r).dump(2));
  } else {
    print_text(r);
  }
  std::fflush(stdout);
  return 0;
}

}  // namespace

Command add_probe_command(CLI::App& root) {
  auto a = std::make_shared<ProbeArgs>();
  CLI::App* app = root.add_subcommand("probe", "Measure this machine: memory bandwidth, compute rates, cores, memory");
  app->add_flag("--json", a->json, "Print the result as JSON");
  app->add_option("-t,--threads", a->options.threads, "Threads for the multi-threaded figures (default: all cores)")
      ->check(CLI::Range(0, 1024));
  app->add_option("--seconds", a->options.seconds, "Time budget of the measurements")
      ->check(CLI::Range(0.01, 3600.0))
      ->capture_default_str();
  app->add_option("--buffer-mib", a->buffer_mib,
                  "Bandwidth test buffer in MiB (default: 1024 or 4x the last-level cache, whichever is larger)")
      ->check(CLI::Range(uint64_t{2}, uint64_t{1} << 20));
  return {app, [a] { return run_probe(*a); }};
}

}  // namespace tessera
