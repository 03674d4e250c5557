// Live profiles: one short connection per worker (handshake, link measurement, ProbeRequest, Bye), so the worker is
// free for the run's own connection right after.
#include "plan/live_cluster.h"

#include <algorithm>
#include <cctype>
#include <optional>
#include <set>

#include "net/handshake.h"
#include "net/keys.h"
#include "net/link_measure.h"
#include "net/transport.h"
#include "util/error.h"
#include "util/log.h"

namespace tessera::plan {

std::vector<WorkerEndpoint> parse_worker_list(std::string_view text) {
  std::vector<WorkerEndpoint> out;
  if (text.empty()) return out;
  std::set<std::string, std::less<>> names;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::string_view item = text.substr(start, comma - start);
    start = comma + 1;
    if (item.empty()) fail("--workers: empty entry in '{}'", text);
    const size_t eq = item.find('=');
    WorkerEndpoint w{std::string(eq == std::string_view::npos ? item : item.substr(0, eq)),
                     std::string(eq == std::string_view::npos ? item : item.substr(eq + 1))};
    const size_t colon = w.address.rfind(':');
    if (w.name.empty() || colon == std::string::npos || colon == 0 || colon + 1 == w.address.size()) {
      fail("--workers: '{}' is not name=host:port or host:port", item);
    }
    if (w.name == "local") fail("--workers: 'local' is the head's own name; give the worker another");
    if (!names.insert(w.name).second) fail("--workers: the name '{}' is used twice", w.name);
    out.push_back(std::move(w));
  }
  return out;
}

std::string plan_node_name(std::string_view typed) {
  std::string name;
  for (char ch : typed.substr(0, 63)) {
    const bool ok = std::isalnum(static_cast<unsigned char>(ch)) || ch == '.' || ch == '_' || ch == '-';
    name += ok ? ch : '_';
  }
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name.front()))) name = "w" + name;
  return name;
}

WorkerProbe probe_worker(const WorkerEndpoint& worker, const LiveProbeOptions& o,
                         std::span<const WorkerEndpoint> peers) {
  std::optional<net::ClusterKey> key;
  if (!o.key_file.empty()) key = net::load_cluster_key(o.key_file);
  const std::string name = plan_node_name(worker.name);
  WorkerProbe r;
  try {
    auto conn = net::connect(worker.address, key ? &*key : nullptr, o.timeout);
    net::client_handshake(*conn, net::make_hello(net::Role::Head, "head"), o.timeout);
    r.link = {"local", name, 0.0002, 10.0, "assumed (not measured)"};
    if (o.measure_links) {
      net::MeasureOptions mo;
      mo.timeout = o.timeout;
      const net::LinkMeasurement m = net::measure_link(*conn, mo);
      // The planner's links are symmetric: the slower direction stands for both.
      const double bytes_per_s = std::min(m.upload_bytes_per_s, m.download_bytes_per_s);
      r.link = {"local", name, m.rtt_s, std::min(bytes_per_s * 8.0 / 1e9, 10000.0),
                fmt::format("measured: {}", net::describe(m))};
    }
    net::ProbeRequest req;
    req.seconds = static_cast<float>(std::clamp(o.worker_seconds, 0.05, 60.0));
    req.max_age_s = static_cast<uint32_t>(std::clamp(o.worker_max_age_s, 0.0, 86400.0));
    if (o.measure_links) {
      for (const auto& p : peers) req.peers.push_back({plan_node_name(p.name), p.address});
    }
    conn->send(req);
    // The worker measures for about `seconds` (plus setting up its buffer) while its heartbeats keep the link alive,
    // then its peer links (each well under a second; 5 s timeouts for each of its exchanges).
    const auto wait = o.timeout + std::chrono::milliseconds(static_cast<int64_t>(req.seconds * 3000)) +
                      std::chrono::seconds(20) * static_cast<int64_t>(req.peers.size());
    const auto reply = conn->recv(wait);
    if (!reply) fail("no answer to the profile request within {:.0f} s", std::chrono::duration<double>(wait).count());
    if (const auto* err = std::get_if<net::ErrorMsg>(&*reply)) fail("{}", err->message);
    const auto* p = std::get_if<net::ProbeReply>(&*reply);
    if (p == nullptr) fail("expected ProbeReply, got {}", net::msg_type_name(net::type_of(*reply)));
    conn->close("profile taken");
    NodeProfile& n = r.node;
    n.name = name;
    n.mem_available_bytes = p->mem_available_bytes;
    n.mem_read_gbps = p->mem_read_gbps;
    n.machine_read_gbps = p->machine_read_gbps;
    for (const auto& b : p->batch_rates) n.batch_rates.push_back({static_cast<int>(b.tokens), b.fraction});
    n.int8_gops = p->int8_gops;
    n.f32_gflops = p->f32_gflops;
    n.cores = static_cast<int>(p->cores);
    n.repack = p->repack;
    n.threads = static_cast<int>(p->threads);
    if (!p->machine.empty() && !p->cpus.empty()) {
      n.machine = p->machine;
      n.cpus = parse_cpu_list(p->cpus, p->cores);
    }
    n.source = p->age_s > 0 ? fmt::format("worker probe, {:.0f} s old", p->age_s) : "worker probe";
    validate_node(n);
    if (p->peer_links.size() != req.peers.size()) {
      fail("answered {} peer links for {} peers", p->peer_links.size(), req.peers.size());
    }
    for (size_t i = 0; i < req.peers.size(); ++i) {
      const net::PeerLinkReport& l = p->peer_links[i];
      const std::string& peer = req.peers[i].name;
      if (!l.error.empty() || !(l.up_bytes_per_s > 0) || !(l.down_bytes_per_s > 0)) {
        r.unreachable.push_back({peer, l.error.empty() ? "no figures" : l.error});
        continue;
      }
      // Symmetric for the planner, as the head's links: the slower direction stands for both.
      const double bytes_per_s = std::min(l.up_bytes_per_s, l.down_bytes_per_s);
      r.peer_links.push_back(
          {name, peer, l.rtt_s, std::min(bytes_per_s * 8.0 / 1e9, 10000.0),
           fmt::format("measured by {}: rtt {:.2f} ms, {:.2f} GB/s", name, l.rtt_s * 1e3, bytes_per_s / 1e9)});
    }
  } catch (const Error& e) {
    fail("worker {} ({}): cannot get its profile: {}", worker.name, worker.address, e.what());
  }
  return r;
}

Cluster probe_live_cluster(std::span<const WorkerEndpoint> workers, const LiveProbeOptions& o) {
  return live_cluster(probe_local_node(o.local), workers, o);
}

Cluster live_cluster(NodeProfile head, std::span<const WorkerEndpoint> workers, const LiveProbeOptions& o) {
  head.name = "local";
  std::vector<NodeProfile> nodes = {std::move(head)};
  std::vector<LinkProfile> links, group_links;
  std::vector<WorkerProbe::Unreachable> unreachable;
  std::vector<std::string> by;  // who reported each unreachable pair
  std::set<std::string, std::less<>> names = {"local"};
  for (size_t i = 0; i < workers.size(); ++i) {
    const WorkerEndpoint& w = workers[i];
    WorkerProbe p = probe_worker(w, o, workers.subspan(i + 1));
    if (!names.insert(p.node.name).second) {
      fail("--workers: '{}' and another worker have the same name for the planner ({})", w.name, p.node.name);
    }
    log_info("plan: worker {}: {:.1f} GB/s read, {:.0f} int8 GOPS, {:.1f} GiB free ({}); link {}", w.name,
             p.node.mem_read_gbps, p.node.int8_gops, static_cast<double>(p.node.mem_available_bytes) / (1 << 30),
             p.node.source, p.link.source);
    for (const auto& l : p.peer_links) log_info("plan: link {} <-> {}: {}", l.a, l.b, l.source);
    for (auto& u : p.unreachable) {
      log_warn("plan: worker {} cannot reach {}: {}", w.name, u.peer, u.why);
      by.push_back(p.node.name);
      unreachable.push_back(std::move(u));
    }
    group_links.insert(group_links.end(), p.peer_links.begin(), p.peer_links.end());
    nodes.push_back(std::move(p.node));
    links.push_back(std::move(p.link));
  }
  // The runtime relays activations through the head (a star), so a worker-to-worker hop is two links in a row:
  // both latencies, and each byte crosses both.
  const size_t n_direct = links.size();
  for (size_t i = 0; i < n_direct; ++i) {
    for (size_t j = i + 1; j < n_direct; ++j) {
      const LinkProfile& a = links[i];
      const LinkProfile& b = links[j];
      links.push_back(
          {a.b, b.b, a.rtt_s + b.rtt_s, 1.0 / (1.0 / a.gbit_per_s + 1.0 / b.gbit_per_s), "relayed by the head"});
    }
  }
  Cluster c(std::move(nodes), "local", std::move(links));
  c.set_group_links(std::move(group_links));
  for (size_t i = 0; i < unreachable.size(); ++i) c.add_unreachable(by[i], unreachable[i].peer, unreachable[i].why);
  c.set_worker_groups(o.group_wire_bytes);
  return c;
}

}  // namespace tessera::plan
