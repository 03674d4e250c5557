// Link measurement for the connect report and the planner: round-trip time (median of several Pings) and
// bandwidth each way (timed transfers of a few MB). The peer must be inside Connection::recv, which answers Pings.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "net/transport.h"

namespace tessera::net {

struct LinkMeasurement {
  double rtt_s = 0;               // median round trip of an empty Ping
  double upload_bytes_per_s = 0;  // this node -> peer
  double download_bytes_per_s = 0;
  int pings = 0;
  uint64_t transfer_bytes = 0;  // bytes timed in each direction
};

struct MeasureOptions {
  int pings = 7;
  uint32_t transfer_bytes = 8u << 20;
  std::chrono::milliseconds timeout{10000};  // for each exchange
};

// Runs the measurement on an idle connection (any other message arriving meanwhile is a protocol error).
LinkMeasurement measure_link(Connection& connection, const MeasureOptions& options = {});

// "rtt 0.21 ms, up 1.9 GB/s, down 2.0 GB/s"
std::string describe(const LinkMeasurement& m);

}  // namespace tessera::net
