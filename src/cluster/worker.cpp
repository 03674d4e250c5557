// Worker: the accept loop runs on the caller's thread; the one active head is served on a session thread the
// Worker owns. Every request the head sends is validated by the codec and again by the Stage.
#include "cluster/worker.h"

#include <chrono>
#include <thread>

#include "cluster/worker_session.h"
#include "net/handshake.h"
#include "util/error.h"
#include "util/log.h"

namespace tessera::cluster {

using namespace std::chrono_literals;

Worker::Worker(WorkerOptions options)
    : options_(std::move(options)),
      listener_(options_.listen, options_.key ? &*options_.key : nullptr, options_.transport) {
  if (options_.name.empty()) {
    // Node names are letters, digits, '.', '_' and '-': the address with its colon replaced.
    options_.name = listener_.endpoint();
    for (auto& ch : options_.name) {
      if (ch == ':') ch = '_';
    }
  }
}

Worker::~Worker() {
  stopping_ = true;
  group_.abort(fmt::format("worker {} is stopping and left the group", options_.name));
  if (session_thread_.joinable()) session_thread_.join();
}

void Worker::serve(const std::atomic<bool>& stop) {
  const net::Hello self = net::make_hello(net::Role::Worker, options_.name);
  while (!stop.load() && !stopping_.load()) {
    std::unique_ptr<net::Connection> conn;
    try {
      conn = listener_.accept(200ms);
    } catch (const std::exception& e) {
      log_warn("worker {}: {}", options_.name, e.what());
      continue;
    }
    if (!conn) continue;
    try {
      const net::Hello peer = net::receive_hello(*conn, 5s);
      if (auto refusal = net::check_hello(peer, self)) {
        conn->send(*refusal);
        conn->close("refused");
        continue;
      }
      if (peer.role == net::Role::Peer) {
        accept_peer(std::move(conn), self);
        continue;
      }
      // A head that just said Bye may still be closing: give its session a moment before calling this one busy.
      for (int i = 0; i < 20; ++i) {
        {
          std::lock_guard probe(mutex_);
          if (active_head_.empty()) break;
        }
        std::this_thread::sleep_for(50ms);
      }
      // Heads call themselves "head": "head at 10.0.0.1:40000" then, rather than "head head".
      const std::string who = peer.node_name == "head" ? fmt::format("head at {}", conn->address())
                                                       : fmt::format("head {} ({})", peer.node_name, conn->address());
      std::lock_guard lock(mutex_);
      if (!active_head_.empty()) {
        conn->send(net::refuse_hello(self, net::HelloStatus::Busy, fmt::format("busy: serving {}", active_head_)));
        conn->close("busy");
        log_info("worker {}: refused {}: busy with {}", options_.name, who, active_head_);
        continue;
      }
      if (session_thread_.joinable()) session_thread_.join();
      conn->send(net::accept_hello(self));
      active_head_ = who;
      log_info("worker {}: serving {}", options_.name, who);
      session_thread_ = std::thread([this, c = std::move(conn), head = who]() mutable { session(std::move(c), head); });
    } catch (const std::exception& e) {
      log_warn("worker {}: {}", options_.name, e.what());
    }
  }
  stopping_ = true;
  // A group's follower waits on its head, not on stopping_: end the group, telling its members who left.
  group_.abort(fmt::format("worker {} is stopping (SIGTERM or SIGINT) and left the group", options_.name));
  if (session_thread_.joinable()) session_thread_.join();
}

void Worker::accept_peer(std::unique_ptr<net::Connection> conn, const net::Hello& self) {
  conn->send(net::accept_hello(self));
  // A peer measuring the link for the head's planner (cluster/peer_measure.h) sends Pings, which recv answers, then
  // Bye: a few MiB each way, well within the wait.
  auto first = conn->recv(10s);
  if (first && std::holds_alternative<net::Bye>(*first)) {
    conn->close("link measured");
    return;
  }
  const auto* link = first ? std::get_if<net::GroupLink>(&*first) : nullptr;
  if (link == nullptr) {
    conn->close("expected GroupLink");
    log_warn("worker {}: {} did not say which group it links", options_.name, conn->peer());
    return;
  }
  inbox_.put(link->group_id, link->rank, std::move(conn));
}

void Worker::session(std::unique_ptr<net::Connection> owned, std::string head_name) {
  std::shared_ptr<net::Connection> conn(std::move(owned));
  try {
    WorkerSession session(options_, probe_cache_, head_name);
    std::string end_reason;
    auto last_message = std::chrono::steady_clock::now();
    while (!stopping_.load() && !session.finished()) {
      auto msg = conn->recv(200ms);
      if (!msg) {
        const auto idle = std::chrono::steady_clock::now() - last_message;
        if (options_.idle_timeout.count() > 0 && idle >= options_.idle_timeout) {
          log_info("worker {}: {} sent nothing for {:.0f} s (--idle-timeout): ending its session", options_.name,
                   head_name, std::chrono::duration<double>(idle).count());
          break;
        }
        continue;
      }
      last_message = std::chrono::steady_clock::now();
      if (const auto* join = std::get_if<net::GroupJoin>(&*msg)) {
        // A group ends the session: the head's link carried the group's collectives and closes with it.
        try {
          join_group(*join, conn, options_, inbox_, group_);
          log_info("worker {}: {} ended the group", options_.name, head_name);
        } catch (const std::exception& e) {
          if (stopping_.load()) {
            log_info("worker {}: stopped: left the group of {}", options_.name, head_name);
          } else {
            log_warn("worker {}: group of {}: {}", options_.name, head_name, e.what());
          }
          try {
            conn->send(net::error_message(net::ErrorCode::LoadFailed, e.what()));
          } catch (const std::exception&) {
            // The head is gone or closed the link: it knows.
          }
        }
        break;
      }
      for (const auto& reply : session.handle(std::move(*msg))) conn->send(reply);
      end_reason = session.end_reason();
    }
    if (!end_reason.empty()) conn->close(end_reason);
  } catch (const std::exception& e) {
    log_info("worker {}: {} gone: {}", options_.name, head_name, e.what());
  }
  conn->close("session over");
  std::lock_guard lock(mutex_);
  active_head_.clear();
  log_info("worker {}: ready for a new head", options_.name);
}

}  // namespace tessera::cluster
