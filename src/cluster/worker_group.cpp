// join_group: the checks a worker makes before it takes a share of a model, the mesh of links (a member dials the
// members ranked below it), then the follower the worker's command provides.
#include "cluster/worker_group.h"

#include <algorithm>

#include "cluster/link_communicator.h"
#include "cluster/model_identity.h"
#include "cluster/worker.h"
#include "gguf/gguf_file.h"
#include "net/handshake.h"
#include "util/error.h"
#include "util/log.h"

namespace tessera::cluster {

using namespace std::chrono_literals;

void PeerInbox::put(uint64_t group, uint32_t rank, std::unique_ptr<net::Connection> link) {
  {
    std::lock_guard lock(mutex_);
    const auto stale = Clock::now() - 60s;
    std::erase_if(arrivals_, [&](const Arrival& a) { return a.at < stale; });
    arrivals_.push_back({group, rank, std::move(link), Clock::now()});
  }
  cv_.notify_all();
}

std::unique_ptr<net::Connection> PeerInbox::take(uint64_t group, uint32_t rank, Clock::time_point until) {
  std::unique_lock lock(mutex_);
  for (;;) {
    const auto it = std::find_if(arrivals_.begin(), arrivals_.end(),
                                 [&](const Arrival& a) { return a.group == group && a.rank == rank; });
    if (it != arrivals_.end()) {
      auto link = std::move(it->link);
      arrivals_.erase(it);
      return link;
    }
    if (cv_.wait_until(lock, until) == std::cv_status::timeout) return nullptr;
  }
}

namespace {

std::filesystem::path find_model(const net::GroupJoin& join, const WorkerOptions& o) {
  const std::string me = fmt::format("worker {}", o.name);
  if (!o.weights.models_dir) {
    fail("{} has no --models folder: each member of a group opens the model ({}) from its own copy", me,
         join.file_name);
  }
  const auto path = *o.weights.models_dir / join.file_name;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    fail("{}: the model {} is not in its --models folder {}", me, join.file_name, o.weights.models_dir->string());
  }
  const auto file = gguf::GgufFile::open(path);
  if (file.file_size() != join.file_size) {
    fail("{}: its {} has {} bytes, the head's {}: a different file", me, path.string(), file.file_size(),
         join.file_size);
  }
  if (model_identity(file) != join.model_hash) {
    fail("{}: its {} is not the head's model (same size, other tensors)", me, path.string());
  }
  return path;
}

}  // namespace

void join_group(const net::GroupJoin& join, std::shared_ptr<net::Connection> head, const WorkerOptions& o,
                PeerInbox& inbox) {
  const std::string me = fmt::format("worker {}", o.name);
  if (!o.follow_group) fail("{} cannot follow a tensor-parallel group", me);
  if (!o.key) {
    fail(
        "{} has no cluster key (--key-file): the members of a group link to each other, and only the key "
        "authenticates them",
        me);
  }
  const std::filesystem::path model = find_model(join, o);
  const int n = static_cast<int>(join.members.size());
  const int rank = static_cast<int>(join.rank);
  const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(join.timeout_s * 1000.0f));
  net::TransportOptions transport = o.transport;
  transport.send_stall = timeout;
  std::vector<LinkMember> members(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    members[static_cast<size_t>(r)].name = join.members[static_cast<size_t>(r)].name;
    members[static_cast<size_t>(r)].address = join.members[static_cast<size_t>(r)].address;
  }
  members[0].link = head;
  const auto describe = [&](int r) {
    return fmt::format("worker {} ({})", members[static_cast<size_t>(r)].name, members[static_cast<size_t>(r)].address);
  };
  for (int q = 1; q < rank; ++q) {
    auto& m = members[static_cast<size_t>(q)];
    try {
      auto link = net::connect(m.address, &*o.key, std::max<std::chrono::milliseconds>(timeout, 10s), transport);
      net::client_handshake(*link, net::make_hello(net::Role::Peer, o.name), 10s);
      link->send(net::GroupLink{join.group_id, join.rank});
      m.link = std::move(link);
    } catch (const std::exception& e) {
      fail("{} could not link to its peer {}: {}", me, describe(q), e.what());
    }
  }
  const auto until = std::chrono::steady_clock::now() + std::max<std::chrono::milliseconds>(timeout, 30s);
  for (int q = rank + 1; q < n; ++q) {
    auto& m = members[static_cast<size_t>(q)];
    while (!m.link) {
      const auto now = std::chrono::steady_clock::now();
      if (now >= until) fail("{}: its peer {} did not link to it in time", me, describe(q));
      m.link = inbox.take(join.group_id, static_cast<uint32_t>(q), std::min(until, now + 200ms));
      // The head sends nothing until the group is ready: anything from it (a Bye) ends the wait.
      if (!m.link) {
        if (auto msg = head->recv(1ms)) {
          fail("{}: the head sent {} while the group was linking", me, net::msg_type_name(net::type_of(*msg)));
        }
      }
    }
  }
  head->send(net::GroupReady{join.group_id});
  LinkOptions lo;
  lo.timeout = timeout;
  lo.wire = join.wire_type;
  auto comm = std::make_shared<LinkCommunicator>(rank, std::move(members), lo);
  log_info("{}: rank {} of a group of {} over {} ({} wire), following the head", me, rank, n, model.filename().string(),
           net::wire_type_name(join.wire_type));
  o.follow_group(GroupTask{join, model, comm, o});
}

}  // namespace tessera::cluster
