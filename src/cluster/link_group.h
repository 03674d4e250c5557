// The head's side of a tensor/expert-parallel group over worker links: it dials every worker, hands each its rank,
// the members' addresses, the model's identity and the parallel options (GroupJoin), waits until all of them have
// linked to each other, and is rank 0 of the LinkCommunicator that results.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cluster/group_share.h"
#include "cluster/link_communicator.h"
#include "net/keys.h"
#include "net/messages.h"

namespace tessera::cluster {

struct GroupWorker {
  std::string name;     // as --workers names it
  std::string address;  // host:port
};

struct GroupStart {
  std::vector<GroupWorker> workers;  // ranks 1..n-1 in this order
  std::string leader = "head";       // rank 0's name in the members' messages (a stage's leading worker, say)
  const net::ClusterKey* key = nullptr;
  // The group's options (model identity, parallel options, n_ctx, ...); group_id, rank and members are filled in.
  net::GroupJoin join;
  LinkOptions link;
  std::chrono::milliseconds connect_timeout{10000};
  // A worker that opens the model and links to its peers within this long is ready.
  std::chrono::milliseconds ready_timeout{120000};
  // The share of a rank whose worker has no copy of the model (ShareRequest); unset: such a worker is refused.
  std::function<ShareSource(int rank)> share;
};

struct StartedGroup {
  std::shared_ptr<LinkCommunicator> comm;
  std::vector<uint64_t> weight_bytes_sent;  // by rank (0 for the head): shares streamed to the members
};

// Throws Error naming the worker that cannot be reached, refuses, lacks the model or does not link to its peers.
StartedGroup start_group(const GroupStart& start);

}  // namespace tessera::cluster
