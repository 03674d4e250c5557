// start_group: one thread per worker connects, hands out its rank, sends its share when it asks for one and waits
// until it is ready, so the members open the model, receive their shares and link to each other at the same time:
// the start takes as long as the slowest member, not the sum.
#include "cluster/link_group.h"

#include <atomic>
#include <functional>
#include <mutex>
#include <random>
#include <thread>

#include "cluster/progress.h"
#include "net/handshake.h"
#include "util/error.h"
#include "util/log.h"

namespace tessera::cluster {

namespace {

using Clock = std::chrono::steady_clock;

// A member without the model: its table, its answer (ShareAccept, or an Error: too little memory), its bytes.
uint64_t send_share_to(net::Connection& link, const GroupStart& start, int rank, uint64_t group_id,
                       const std::string& who, const std::function<bool()>& cancelled) {
  if (!start.share) fail("{} has no copy of the model, and this head sends none", who);
  ShareSource share = start.share(rank);
  share.table.group_id = group_id;
  log_info("group: {} has no copy of the model: sending its share, {} of the model's {}", who,
           TransferProgress::format_bytes(share.bytes), TransferProgress::format_bytes(share.model_bytes));
  link.send(share.table);
  const auto until = Clock::now() + std::chrono::seconds(120);
  for (;;) {
    auto msg = link.recv(std::chrono::milliseconds(200));
    if (!msg) {
      if (Clock::now() >= until) fail("{} did not answer its share's table", who);
      continue;
    }
    if (const auto* error = std::get_if<net::ErrorMsg>(&*msg)) fail("{}", error->message);
    if (std::holds_alternative<net::ShareAccept>(*msg)) break;
    fail("{} answered its share's table with {}", who, net::msg_type_name(net::type_of(*msg)));
  }
  return send_share(link, share, cancelled);
}

// What the members' threads share: the first failure (which ends every other member's wait) and its message.
class StartState {
 public:
  void fail_with(std::string message) {
    std::lock_guard lock(mutex_);
    if (!failed_.exchange(true)) first_ = std::move(message);
  }
  bool failed() const { return failed_.load(); }
  std::string first() {
    std::lock_guard lock(mutex_);
    return first_;
  }

 private:
  std::mutex mutex_;
  std::atomic<bool> failed_{false};
  std::string first_;
};

// One member's start, on its own thread: dial, join, send its share if it asks, wait for GroupReady. Returns false
// when another member failed first (this one is abandoned, not at fault).
bool start_member(const GroupStart& start, net::GroupJoin join, int rank, LinkMember& m, uint64_t& sent,
                  StartState& state) {
  const std::string who = fmt::format("worker {} ({})", m.name, m.address);
  net::TransportOptions transport;
  transport.send_stall = start.link.timeout;
  auto link = net::connect(m.address, start.key, start.connect_timeout, transport);
  net::client_handshake(*link, net::make_hello(net::Role::Head, start.leader), start.connect_timeout);
  join.rank = static_cast<uint32_t>(rank);
  link->send(join);
  m.link = std::move(link);
  log_info("group: {} is rank {} of {}: opening the model and linking to its peers", who, rank, join.members.size());
  auto until = Clock::now() + start.ready_timeout;
  for (;;) {
    if (state.failed()) return false;
    auto msg = m.link->recv(std::chrono::milliseconds(200));
    if (!msg) {
      if (Clock::now() >= until) {
        fail("did not open the model and link to its peers within {:.0f} s",
             std::chrono::duration<double>(start.ready_timeout).count());
      }
      continue;
    }
    if (const auto* error = std::get_if<net::ErrorMsg>(&*msg)) fail("{}", error->message);
    if (std::holds_alternative<net::ShareRequest>(*msg)) {
      // Another member's failure ends this stream too: the start fails at once, not after the whole share.
      sent = send_share_to(*m.link, start, rank, join.group_id, who, [&] { return state.failed(); });
      until = Clock::now() + start.ready_timeout;
      continue;
    }
    const auto* ready = std::get_if<net::GroupReady>(&*msg);
    if (ready == nullptr || ready->group_id != join.group_id) {
      fail("answered the group with {}", net::msg_type_name(net::type_of(*msg)));
    }
    log_info("group: {}: weights from {}, {} weight bytes sent", who,
             ready->weights_from.empty() ? "?" : ready->weights_from, sent);
    return true;
  }
}

}  // namespace

StartedGroup start_group(const GroupStart& start) {
  const int n = static_cast<int>(start.workers.size()) + 1;
  std::random_device random;
  net::GroupJoin join = start.join;
  join.group_id = (static_cast<uint64_t>(random()) << 32) ^ random();
  join.members = {{start.leader, ""}};
  for (const auto& w : start.workers) join.members.push_back({w.name, w.address});
  std::vector<LinkMember> members(static_cast<size_t>(n));
  members[0] = {start.leader, "", nullptr};
  for (int r = 1; r < n; ++r) {
    const GroupWorker& w = start.workers[static_cast<size_t>(r - 1)];
    members[static_cast<size_t>(r)] = {w.name, w.address, nullptr};
  }
  std::vector<uint64_t> sent(static_cast<size_t>(n), 0);
  StartState state;
  {
    // Every member at once: one that waits for its share may hold up a peer that waits for its link. The threads
    // end (joined here) when their member is ready, fails, or another member failed.
    std::vector<std::jthread> threads;
    for (int r = 1; r < n; ++r) {
      threads.emplace_back([&, r] {
        auto& m = members[static_cast<size_t>(r)];
        try {
          start_member(start, join, r, m, sent[static_cast<size_t>(r)], state);
        } catch (const std::exception& e) {
          state.fail_with(fmt::format("worker {} ({}) cannot join the group: {}", m.name, m.address, e.what()));
        } catch (...) {
          state.fail_with(fmt::format("worker {} ({}) cannot join the group: an unknown error", m.name, m.address));
        }
      });
    }
  }
  if (state.failed()) fail("{}", state.first());
  log_info("group: {} members linked over TLS ({} wire for the partial sums)", n, net::wire_type_name(start.link.wire));
  uint64_t total = 0;
  for (uint64_t b : sent) total += b;
  log_info("group: {} weight bytes sent to the members", total);
  return {std::make_shared<LinkCommunicator>(0, std::move(members), start.link), std::move(sent)};
}

}  // namespace tessera::cluster
