// What a link between two nodes costs: round-trip time and bandwidth. Symmetric; measured by the transport's
// ping/bulk test on live clusters or given in cluster.json for hypothetical ones.
#pragma once

#include <string>

namespace tessera::plan {

struct LinkProfile {
  std::string a, b;  // node names; the same link serves both directions
  double rtt_s = 0;
  double gbit_per_s = 0;  // 1e9 bits/s of payload
  std::string source;

  double bytes_per_s() const { return gbit_per_s * 1e9 / 8.0; }
  // Time for one message of `bytes` on this link: half a round trip plus the transfer (fixed overheads apart).
  double one_way_s(double bytes) const { return rtt_s / 2.0 + bytes / bytes_per_s(); }
};

// Throws Error naming the link and the field for a negative or non-finite RTT or a bandwidth outside (0, 10000].
void validate_link(const LinkProfile& link);

}  // namespace tessera::plan
