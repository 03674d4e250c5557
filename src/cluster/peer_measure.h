// A worker's links to other workers, measured at the head's request (ProbeRequest.peers) for the planner: the links
// a tensor/expert-parallel group's collectives would take, which the head cannot measure from where it is.
#pragma once

#include <span>
#include <vector>

#include "net/messages.h"

namespace tessera::cluster {

struct WorkerOptions;

// Dials each peer as a group member would (TLS with the cluster key, role peer), measures the link (5 pings and a
// 4 MiB burst each way: about 0.15 s on a 1 Gbit/s link) and says Bye. A peer that cannot be reached gets a report
// with its error instead of figures; never throws.
std::vector<net::PeerLinkReport> measure_peers(std::span<const net::GroupMember> peers, const WorkerOptions& options);

}  // namespace tessera::cluster
