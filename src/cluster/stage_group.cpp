// Stage groups: the GroupJoin a leader derives from its LoadStage, and the member's side (its share of the stage's
// layers in a LocalExecutor that follows rank 0), the same Stage code as every other placement.
#include "cluster/stage_group.h"

#include <thread>

#include "cluster/progress.h"
#include "cluster/worker.h"
#include "engine/local_executor.h"
#include "gguf/gguf_file.h"
#include "model/model_config.h"
#include "util/error.h"
#include "util/log.h"

namespace tessera::cluster {

net::GroupJoin stage_group_join(const net::LoadStage& load) {
  net::GroupJoin j;
  j.file_name = load.file_name;
  j.file_size = load.file_size;
  j.model_hash = load.model_hash;
  j.tp = load.group_tp;
  j.ep = load.group_ep;
  j.n_slots = load.n_slots;
  j.n_ctx = load.n_ctx;
  j.kv_type = load.kv_type;
  j.wire_type = load.wire_type;
  j.threads = load.threads;
  j.timeout_s = load.group_timeout_s;
  j.layer_begin = load.layer_begin;
  j.layer_end = load.layer_end;
  j.shares = load.group_shares;
  j.ep_redundancy = load.group_ep ? load.group_ep_redundancy : 0.0f;
  return j;
}

ShardSpec stage_group_shard(const net::GroupJoin& join, int rank, int n) {
  ShardSpec spec;
  spec.rank = rank;
  spec.n_ranks = n;
  spec.tp = join.tp;
  spec.ep = join.ep;
  spec.ep_redundancy = join.ep ? join.ep_redundancy : 0.0;
  if (!join.shares.empty()) spec.shares = parse_shares(join.shares, n);
  return spec;
}

std::function<ShareSource(int)> stage_shares(std::shared_ptr<const ModelWeights> weights, const net::GroupJoin& join,
                                             int n) {
  return [weights = std::move(weights), join, n](int rank) {
    net::GroupJoin member = join;
    member.members.resize(static_cast<size_t>(n));  // share_key reads the count
    member.rank = static_cast<uint32_t>(rank);
    return share_source(weights, stage_group_shard(member, rank, n), share_key(member));
  };
}

std::shared_ptr<LinkCommunicator> start_stage_group(const net::GroupJoin& join, const std::string& leader,
                                                    const std::vector<GroupWorker>& members, const net::ClusterKey& key,
                                                    std::function<ShareSource(int)> share) {
  GroupStart start;
  start.leader = leader;
  start.workers = members;
  start.key = &key;
  start.join = join;
  start.link.timeout = std::chrono::milliseconds(static_cast<int64_t>(join.timeout_s * 1000.0f));
  start.link.wire = join.wire_type;
  start.share = std::move(share);
  return start_group(start).comm;
}

void follow_stage_group(const GroupTask& t) {
  const net::GroupJoin& j = t.join;
  const int n = static_cast<int>(j.members.size());
  const int rank = static_cast<int>(j.rank);
  std::shared_ptr<const gguf::TensorSource> source = t.source;
  if (!source) source = std::make_shared<gguf::GgufFile>(gguf::GgufFile::open(t.model));
  const ModelConfig config = ModelConfig::from_gguf(*source);
  if (j.layer_end > config.n_layer) {
    fail("worker {}: the stage's layers {}-{} are beyond {}'s {} layers", t.worker.name, j.layer_begin, j.layer_end - 1,
         j.file_name, config.n_layer);
  }
  const LayerRange layers{j.layer_begin, j.layer_end};
  auto weights = ModelWeights::load(source, layers, j.layer_begin == 0, j.layer_end == config.n_layer);
  StageOptions so;
  so.n_slots = j.n_slots;
  so.n_ctx = j.n_ctx;
  so.kv_type = j.kv_type;
  so.repack = t.worker.repack;
  so.copy_weights = t.worker.copy_weights;
  so.exact_gelu = j.exact_gelu;
  so.shard = stage_group_shard(j, rank, n);
  const int threads = j.threads > 0 ? j.threads : t.worker.threads;
  LocalExecutor member(weights, so, threads > 0 ? threads : static_cast<int>(std::thread::hardware_concurrency()),
                       t.worker.pin, t.comm);
  log_info("worker {}: rank {} of a group of {} holding layers {}-{} of {} ({} of weights, KV cache {})", t.worker.name,
           rank, n, j.layer_begin, j.layer_end - 1, j.file_name,
           TransferProgress::format_bytes(member.stage().copied_bytes()),
           TransferProgress::format_bytes(member.stage().cache().bytes()));
  member.follow();
}

}  // namespace tessera::cluster
