// What the collectives of a tensor/expert-parallel group cost: one all-reduce of B bytes over N ranks is a fixed
// latency plus B times a cost per byte. The two numbers come from the links (a ring over the slowest link of the
// group, for planned clusters) or from a short sweep over the real communicator at start (under MPI).
// docs/planner.md, "Tensor and expert parallel", derives them.
#pragma once

#include <string>
#include <vector>

namespace tessera::plan {

struct CollectiveSample {
  double bytes = 0;    // the all-reduced buffer (each rank's)
  double seconds = 0;  // median time of one all-reduce of it
};

struct CollectiveProfile {
  int ranks = 1;
  double latency_s = 0;                   // one all-reduce of a few bytes
  double seconds_per_byte = 0;            // each further byte of the buffer
  std::string source;                     // "ring over 10 Gbit/s, 0.2 ms RTT links", "measured over MPI at start"
  std::vector<CollectiveSample> samples;  // what was measured (empty for a ring over links)
  // The link behind a ring (0 when measured): for the arithmetic the plan prints.
  double link_rtt_s = 0, link_bytes_per_s = 0, message_overhead_s = 0;
  std::string link_pair;  // "a <-> b": the group's slowest link (empty when measured)
  // Over worker links (link_all_reduce): all-reduces of up to direct_max_bytes (f32) are a direct exchange costing
  // direct_latency_s + bytes x direct_seconds_per_byte, larger ones the ring (latency_s, seconds_per_byte); 0: none.
  double direct_max_bytes = 0, direct_latency_s = 0, direct_seconds_per_byte = 0;
  double wire_fraction = 1;  // wire bytes per f32 byte of the partial sums (0.5 for f16)

  // Measured: linear between the measured sizes (the smallest's time below them, the last segment's slope above),
  // since the cost per byte changes with the size (caches, protocols); else latency + bytes x seconds_per_byte.
  double all_reduce_s(double bytes) const;
  // The fixed part of all_reduce_s(bytes), and its cost per further byte (unmeasured profiles).
  bool direct(double bytes) const { return samples.empty() && direct_max_bytes > 0 && bytes <= direct_max_bytes; }
  double latency_for(double bytes) const { return direct(bytes) ? direct_latency_s : latency_s; }
  double seconds_per_byte_for(double bytes) const { return direct(bytes) ? direct_seconds_per_byte : seconds_per_byte; }
  // A gather to rank 0 of `bytes` in all: each byte crosses once, where an all-reduce sends it out and back.
  double gather_s(double bytes) const { return all_reduce_s(bytes / 2.0); }
  bool measured() const { return !samples.empty(); }
};

// A ring all-reduce over `ranks` ranks (the reduce-scatter and the all-gather, 2(N-1) steps, each moving B/N bytes
// over the slowest link of the ring): latency 2(N-1) (RTT/2 + message overhead), per byte 2(N-1) / (N W).
CollectiveProfile ring_all_reduce(int ranks, double rtt_s, double bytes_per_s, double message_overhead_s);

// Over the worker links (cluster::LinkCommunicator), with `wire_bytes` a float on the wire (4 f32, 2 f16/bf16):
// up to direct_max_bytes every member sends its buffer to each other at once, RTT/2 + (N-1) message overheads and
// (N-1) copies of the wire bytes through the sender's link; above it the ring of ring_all_reduce with the wire bytes.
CollectiveProfile link_all_reduce(int ranks, double rtt_s, double bytes_per_s, double message_overhead_s,
                                  int wire_bytes, double direct_max_bytes);

// From measured samples: the latency is the smallest buffer's time, the cost per byte (shown as a bandwidth) the
// least-squares slope of the time above that latency for the larger buffers (through the origin; never negative);
// all_reduce_s interpolates the samples themselves. Needs one sample.
CollectiveProfile fit_collectives(int ranks, std::vector<CollectiveSample> samples, std::string source);

// "all-reduce 4 B 21 us, 64 KiB 95 us, 1 MiB 1.1 ms over 2 ranks (fit: 21 us + 1.05 GB/s)"
std::string collectives_text(const CollectiveProfile& c);
// How one all-reduce of `bytes` is costed, for the plan's arithmetic: "ring of 3: 2(3-1) x (100 us RTT/2 + 40 us
// per message) = 560 us; each byte x 2(3-1)/3 at 1.25 GB/s", the direct exchange's, or the measured sizes.
std::string collective_formula_text(const CollectiveProfile& c, double bytes);
// "32 KiB", "4 B", "1.5 MiB"
std::string bytes_text(double bytes);
// "45 us", "0.93 ms", "1.20 s"
std::string seconds_text(double s);

}  // namespace tessera::plan
