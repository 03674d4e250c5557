// The worker daemon (`tessera worker`): holds one stage for one head at a time, tells a second head it is busy,
// and is ready for the next head when the current one goes away.
#pragma once

#include <atomic>
#include <chrono>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "cluster/stage_assembler.h"
#include "cluster/worker_group.h"
#include "hw/probe.h"
#include "net/keys.h"
#include "net/transport.h"

namespace tessera::cluster {

struct WorkerOptions {
  std::string listen = "127.0.0.1:50052";
  std::string name;  // default: the listen address
  std::optional<net::ClusterKey> key;
  AssemblerOptions weights;
  uint64_t mem_limit = 0;    // bytes; 0: no limit
  int threads = 0;           // 0: all cores
  bool repack = false;       // pack weights at load (StageOptions::repack)
  bool pin = false;          // each compute thread bound to its own CPU (ThreadPool's pin)
  bool copy_weights = true;  // copy weights into huge pages at load (StageOptions::copy_weights)
  // A head that sends nothing but heartbeats for this long loses its session, so the worker can serve another
  // (0: never; a serving head may be idle between requests for hours).
  std::chrono::milliseconds idle_timeout{0};
  net::TransportOptions transport;
  // Runs this worker's share when a head makes it a member of a tensor/expert-parallel group (the command sets it;
  // without it GroupJoin is refused).
  GroupFollower follow_group;
};

class Worker {
 public:
  explicit Worker(WorkerOptions options);
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  std::string endpoint() const { return listener_.endpoint(); }
  const std::string& name() const { return options_.name; }

  // Accepts heads until `stop` becomes true (checked several times a second).
  void serve(const std::atomic<bool>& stop);

 private:
  void session(std::unique_ptr<net::Connection> connection, std::string head_name);
  // A group peer's link: its GroupLink read, then into the inbox for the member that expects it; or a peer that
  // measures the link (Pings, then Bye).
  void accept_peer(std::unique_ptr<net::Connection> connection, const net::Hello& self);

  WorkerOptions options_;
  net::Listener listener_;
  std::mutex mutex_;
  std::string active_head_;  // empty when idle
  std::thread session_thread_;
  std::atomic<bool> stopping_{false};
  ProbeCache probe_cache_;
  PeerInbox inbox_;
  ActiveGroup group_;  // the group the session follows, ended when the worker stops  // links from the peers of a group
                       // this worker is joining  // this machine's profile for heads' ProbeRequests, kept a few minutes
                       // between heads
};

}  // namespace tessera::cluster
