// A pipeline stage held by a group of workers (docs/parallel.md, "Pipelines of groups over worker links"): the
// stage's first member is its endpoint in the pipeline and makes the group with the others as rank 0, exactly as a
// head does for --tp (start_group), for the stage's layers only; the others follow it with their share of them.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "cluster/group_share.h"
#include "cluster/link_group.h"
#include "cluster/worker_group.h"
#include "model/shard.h"
#include "net/messages.h"

namespace tessera::cluster {

// The join a stage's leader sends its members, from the stage it was asked to load (its layers, identity, options).
net::GroupJoin stage_group_join(const net::LoadStage& load);

// Rank `rank`'s share of the stage's layers under the join's layout, in a group of n members (equal shares).
ShardSpec stage_group_shard(const net::GroupJoin& join, int rank, int n);

// The shares of a stage's members, cut from the leader's weights of the stage's layers (`weights`): a member
// without the model receives its share from its leader, which holds every byte of the stage (docs/parallel.md).
std::function<ShareSource(int rank)> stage_shares(std::shared_ptr<const ModelWeights> weights,
                                                  const net::GroupJoin& join, int n);

// The leader (rank 0): links `members` (ranks 1..n-1) for join's layers and returns the group's communicator. Throws
// Error naming a member that cannot join. share: the share of a member without the model (unset: it is refused).
// leader: rank 0's name ("head", or the leading worker's).
std::shared_ptr<LinkCommunicator> start_stage_group(const net::GroupJoin& join, const std::string& leader,
                                                    const std::vector<GroupWorker>& members, const net::ClusterKey& key,
                                                    std::function<ShareSource(int rank)> share = {});

// A member: its share of the stage's layers (from its own file or the share it received), then it runs what rank 0
// sends until rank 0 ends the group.
void follow_stage_group(const GroupTask& task);

}  // namespace tessera::cluster
