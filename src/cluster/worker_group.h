// A worker's part of a tensor/expert-parallel group over the worker links: the links its peers open arrive on its
// listener and wait in a PeerInbox until the member that expects them takes them; join_group checks the model,
// links to every peer and follows rank 0 (the head) until the head ends the group.
#pragma once

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "collective/communicator.h"
#include "gguf/gguf_file.h"
#include "net/messages.h"
#include "net/transport.h"

namespace tessera::cluster {

struct WorkerOptions;

class PeerInbox {
 public:
  using Clock = std::chrono::steady_clock;
  // A link from `rank` of group `group` (its GroupLink read). Links nobody takes within a minute are dropped.
  void put(uint64_t group, uint32_t rank, std::unique_ptr<net::Connection> link);
  // The link from `rank` of `group`, or nullptr when none came by `until`.
  std::unique_ptr<net::Connection> take(uint64_t group, uint32_t rank, Clock::time_point until);

 private:
  struct Arrival {
    uint64_t group;
    uint32_t rank;
    std::unique_ptr<net::Connection> link;
    Clock::time_point at;
  };
  std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<Arrival> arrivals_;
};

class LinkCommunicator;

// The group a worker is in, so a worker told to stop ends it (LinkCommunicator::abort: every member hears why) rather
// than waiting for its head to end it. An abort before the group is linked ends it as soon as it is.
class ActiveGroup {
 public:
  void set(std::shared_ptr<LinkCommunicator> comm);
  void clear();
  void abort(const std::string& why);
  // Why the worker is stopping ("" while it is not): a member still joining gives up with it.
  std::string stop_reason() const;

 private:
  mutable std::mutex mutex_;
  std::shared_ptr<LinkCommunicator> comm_;
  std::string aborted_;
};

// What the command that started the worker runs as a group member: load the model's share over `comm` and follow
// rank 0 (the same code an MPI rank runs), returning when rank 0 ends the group.
struct GroupTask {
  const net::GroupJoin& join;
  std::filesystem::path model;                       // the member's own copy, or empty when `source` holds its share
  std::shared_ptr<const gguf::TensorSource> source;  // the share received from the head (or found in its cache)
  std::shared_ptr<collective::Communicator> comm;
  const WorkerOptions& worker;
};
using GroupFollower = std::function<void(const GroupTask&)>;

// Joins the group the head asked for on `head`: checks the model in --models against the head's identity (or, without
// it, takes its share from its --cache or asks the head for it: ShareRequest), links to the peers (dialling those
// ranked below, taking those above from the inbox), answers GroupReady and follows. Throws Error with a message for the
// head (model missing or different, no key, a peer that does not link).
void join_group(const net::GroupJoin& join, std::shared_ptr<net::Connection> head, const WorkerOptions& options,
                PeerInbox& inbox, ActiveGroup& active);

}  // namespace tessera::cluster
