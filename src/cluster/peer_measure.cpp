// measure_peers: one short connection per peer, which the peer's accept loop answers (Worker::accept_peer takes a
// peer link that sends only Pings and then Bye as a measurement).
#include "cluster/peer_measure.h"

#include <algorithm>
#include <chrono>

#include "cluster/worker.h"
#include "net/codec.h"
#include "net/handshake.h"
#include "net/link_measure.h"
#include "util/log.h"

namespace tessera::cluster {

using namespace std::chrono_literals;

std::vector<net::PeerLinkReport> measure_peers(std::span<const net::GroupMember> peers, const WorkerOptions& o) {
  std::vector<net::PeerLinkReport> out;
  for (const auto& peer : peers) {
    net::PeerLinkReport r;
    r.name = peer.name;
    try {
      auto link = net::connect(peer.address, o.key ? &*o.key : nullptr, 5s, o.transport);
      net::client_handshake(*link, net::make_hello(net::Role::Peer, o.name), 5s);
      net::MeasureOptions mo;
      mo.pings = 5;
      mo.transfer_bytes = 4u << 20;
      mo.timeout = 5s;
      const net::LinkMeasurement m = net::measure_link(*link, mo);
      link->close("link measured");
      const auto wire = [](double x) { return static_cast<float>(std::clamp(x, 0.0, 1e13)); };
      r.rtt_s = static_cast<float>(std::clamp(m.rtt_s, 0.0, 600.0));
      r.up_bytes_per_s = wire(m.upload_bytes_per_s);
      r.down_bytes_per_s = wire(m.download_bytes_per_s);
      log_info("worker {}: link to {} ({}): {}", o.name, peer.name, peer.address, net::describe(m));
    } catch (const std::exception& e) {
      r.error = net::wire_text(e.what(), net::kMaxErrorText);
      if (r.error.empty()) r.error = "unreachable";
      log_warn("worker {}: cannot measure the link to {} ({}): {}", o.name, peer.name, peer.address, e.what());
    }
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace tessera::cluster
