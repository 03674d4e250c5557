// What a node offers a plan: free memory, read bandwidth and compute rates. The planner takes these values whatever
// their source (`tessera probe` on the head, a worker's report, or a hypothetical node from cluster.json).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "hw/batch_rate.h"

namespace tessera::plan {

struct NodeProfile {
  std::string name;  // "local" is the head when it is probed; names are what --split refers to
  uint64_t mem_available_bytes = 0;
  double mem_read_gbps = 0;  // streaming read, 1e9 bytes/s, all threads
  // The whole machine's read rate (a reader on each of its CPUs), which the nodes on it share; 0: not known (the
  // planner then divides mem_read_gbps between the ranks of one machine).
  double machine_read_gbps = 0;
  // The quantized matmul's rate by tokens per pass as measured (probe); empty: the cost model's constants.
  std::vector<BatchRate> batch_rates;
  double int8_gops = 0;   // peak int8 dot products, a multiply-add counted as 2 ops
  double f32_gflops = 0;  // peak f32 FMA, a multiply-add counted as 2 flops
  int cores = 0;          // informational
  // Measured matmul rates (GFLOPS, efficiency included) per weight type, keyed by ggml's type name ("q4_K", "f16").
  // When present they replace peak x efficiency for that type; `bench` can fill them in later.
  std::map<std::string, double, std::less<>> matmul_gflops;
  std::string source;  // "probe", "probe cache (42 s old)", "cluster.json": shown with the plan
  // The node packs its weights at load (--repack): its stages also need the packed copy (ModelCost's packed bytes).
  bool repack = false;
  // Where a probed node runs: `machine` is its system's boot id (empty for a cluster file's node), `cpus` the CPUs
  // its process may use, `threads` those it computes with. Nodes of one machine whose threads outnumber the CPUs
  // they have between them take turns on those CPUs, which each node's own probe does not show.
  std::string machine;
  std::vector<int> cpus;
  int threads = 0;
};

// Throws Error naming the node and the field when a value is missing, not finite, or outside a sane range.
void validate_node(const NodeProfile& node);

// Node names must be usable in `--split` and JSON: 1-64 characters of [A-Za-z0-9_.-], not starting with a digit
// (so "0-3@a" stays unambiguous). Throws Error with the rule.
void validate_node_name(std::string_view name, std::string_view where);

}  // namespace tessera::plan
