// start_group: connect and hand out the ranks to every worker first, then wait for all of them, so the workers open
// the model and link to each other at the same time.
#include "cluster/link_group.h"

#include <random>

#include "cluster/progress.h"
#include "net/handshake.h"
#include "util/error.h"
#include "util/log.h"

namespace tessera::cluster {

namespace {

// A member without the model: its table, its answer (ShareAccept, or an Error: too little memory), its bytes.
uint64_t send_share_to(net::Connection& link, const GroupStart& start, int rank, uint64_t group_id,
                       const std::string& who) {
  if (!start.share) fail("{} has no copy of the model, and this head sends none", who);
  ShareSource share = start.share(rank);
  share.table.group_id = group_id;
  log_info("group: {} has no copy of the model: sending its share, {} of the model's {}", who,
           TransferProgress::format_bytes(share.bytes), TransferProgress::format_bytes(share.model_bytes));
  link.send(share.table);
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  for (;;) {
    auto msg = link.recv(std::chrono::milliseconds(200));
    if (!msg) {
      if (std::chrono::steady_clock::now() >= until) fail("{} did not answer its share's table", who);
      continue;
    }
    if (const auto* error = std::get_if<net::ErrorMsg>(&*msg))
      fail("{} cannot join the group: {}", who, error->message);
    if (std::holds_alternative<net::ShareAccept>(*msg)) break;
    fail("{} answered its share's table with {}", who, net::msg_type_name(net::type_of(*msg)));
  }
  return send_share(link, share);
}

}  // namespace

StartedGroup start_group(const GroupStart& start) {
  const int n = static_cast<int>(start.workers.size()) + 1;
  std::random_device random;
  net::GroupJoin join = start.join;
  join.group_id = (static_cast<uint64_t>(random()) << 32) ^ random();
  join.members = {{start.leader, ""}};
  for (const auto& w : start.workers) join.members.push_back({w.name, w.address});
  net::TransportOptions transport;
  transport.send_stall = start.link.timeout;
  std::vector<LinkMember> members(static_cast<size_t>(n));
  members[0] = {start.leader, "", nullptr};
  for (int r = 1; r < n; ++r) {
    const GroupWorker& w = start.workers[static_cast<size_t>(r - 1)];
    const std::string who = fmt::format("worker {} ({})", w.name, w.address);
    try {
      auto link = net::connect(w.address, start.key, start.connect_timeout, transport);
      net::client_handshake(*link, net::make_hello(net::Role::Head, start.leader), start.connect_timeout);
      join.rank = static_cast<uint32_t>(r);
      link->send(join);
      members[static_cast<size_t>(r)] = {w.name, w.address, std::move(link)};
    } catch (const std::exception& e) {
      fail("{} cannot join the group: {}", who, e.what());
    }
  }
  // Every member is watched at once: one that waits for its share may hold up a peer that waits for its link.
  std::vector<uint64_t> sent(static_cast<size_t>(n), 0);
  std::vector<int> pending;
  for (int r = 1; r < n; ++r) pending.push_back(r);
  auto until = std::chrono::steady_clock::now() + start.ready_timeout;
  while (!pending.empty()) {
    for (auto it = pending.begin(); it != pending.end();) {
      const int r = *it;
      auto& m = members[static_cast<size_t>(r)];
      const std::string who = fmt::format("worker {} ({})", m.name, m.address);
      std::optional<net::Message> msg;
      try {
        msg = m.link->recv(std::chrono::milliseconds(pending.size() > 1 ? 20 : 200));
      } catch (const std::exception& e) {
        fail("{} cannot join the group: {}", who, e.what());
      }
      if (!msg) {
        ++it;
        continue;
      }
      if (const auto* error = std::get_if<net::ErrorMsg>(&*msg)) {
        fail("{} cannot join the group: {}", who, error->message);
      }
      if (std::holds_alternative<net::ShareRequest>(*msg)) {
        sent[static_cast<size_t>(r)] = send_share_to(*m.link, start, r, join.group_id, who);
        until = std::chrono::steady_clock::now() + start.ready_timeout;
        ++it;
        continue;
      }
      const auto* ready = std::get_if<net::GroupReady>(&*msg);
      if (ready == nullptr || ready->group_id != join.group_id) {
        fail("{} answered the group with {}", who, net::msg_type_name(net::type_of(*msg)));
      }
      log_info("group: {}: weights from {}, {} weight bytes sent", who,
               ready->weights_from.empty() ? "?" : ready->weights_from, sent[static_cast<size_t>(r)]);
      it = pending.erase(it);
    }
    if (!pending.empty() && std::chrono::steady_clock::now() >= until) {
      const auto& m = members[static_cast<size_t>(pending.front())];
      fail("worker {} ({}) did not open the model and link to its peers within {:.0f} s", m.name, m.address,
           std::chrono::duration<double>(start.ready_timeout).count());
    }
  }
  log_info("group: {} members linked over TLS ({} wire for the partial sums)", n, net::wire_type_name(start.link.wire));
  uint64_t total = 0;
  for (uint64_t b : sent) total += b;
  log_info("group: {} weight bytes sent to the members", total);
  return {std::make_shared<LinkCommunicator>(0, std::move(members), start.link), std::move(sent)};
}

}  // namespace tessera::cluster
