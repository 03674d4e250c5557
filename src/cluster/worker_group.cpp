// join_group: the checks a worker makes before it takes a share of a model, the mesh of links (a member dials the
// members ranked below it), then the follower the worker's command provides.
#include "cluster/worker_group.h"

#include <algorithm>

#include "cluster/group_share.h"
#include "cluster/link_communicator.h"
#include "cluster/model_identity.h"
#include "cluster/progress.h"
#include "cluster/share_store.h"
#include "cluster/stage_assembler.h"
#include "cluster/stage_memory.h"
#include "cluster/worker.h"
#include "gguf/gguf_file.h"
#include "hw/probe.h"
#include "model/kv_cache.h"
#include "model/model_config.h"
#include "model/shard.h"
#include "net/handshake.h"
#include "tensor/ggml_type.h"
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

void ActiveGroup::set(std::shared_ptr<LinkCommunicator> comm) {
  std::lock_guard lock(mutex_);
  comm_ = std::move(comm);
  if (comm_ && !aborted_.empty()) comm_->abort(aborted_);
}

void ActiveGroup::clear() {
  std::lock_guard lock(mutex_);
  comm_.reset();
}

void ActiveGroup::abort(const std::string& why) {
  std::lock_guard lock(mutex_);
  aborted_ = why;
  if (comm_) comm_->abort(why);
}

std::string ActiveGroup::stop_reason() const {
  std::lock_guard lock(mutex_);
  return aborted_;
}

namespace {

// A member told to stop while it joins leaves at once: the head's start fails with the reason, naming it.
void check_stop(const ActiveGroup& active) {
  if (auto why = active.stop_reason(); !why.empty()) fail("{}", why);
}

// Where a member's weights come from: its own file, or its share (cache or head).
struct GroupModel {
  std::filesystem::path path;
  std::shared_ptr<const gguf::TensorSource> source;
  std::string from;
};

std::optional<std::filesystem::path> own_copy(const net::GroupJoin& join, const WorkerOptions& o) {
  const std::string me = fmt::format("worker {}", o.name);
  if (!o.weights.models_dir) return std::nullopt;
  const auto path = *o.weights.models_dir / join.file_name;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return std::nullopt;
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

// The next message from the head within `limit`, which must be an M (an Error from the head ends the join).
template <class M>
M expect_from_head(net::Connection& head, std::chrono::milliseconds limit, const std::string& me, const char* what,
                   const ActiveGroup& active) {
  const auto until = std::chrono::steady_clock::now() + limit;
  for (;;) {
    check_stop(active);
    auto msg = head.recv(200ms);
    if (!msg) {
      if (std::chrono::steady_clock::now() >= until) fail("{}: the head sent no {} in time", me, what);
      continue;
    }
    if (auto* m = std::get_if<M>(&*msg)) return std::move(*m);
    if (const auto* e = std::get_if<net::ErrorMsg>(&*msg)) fail("{}: the head: {}", me, e->message);
    fail("{}: the head sent {} instead of {}", me, net::msg_type_name(net::type_of(*msg)), what);
  }
}

// What a member holds besides its share's weights: the KV cache of its KV heads for the group's sequences and
// context, and the compute buffers of a prompt batch (the follower's default -b, as cmd_worker loads it).
struct MemberNeeds {
  uint64_t kv = 0;
  uint64_t buffers = 0;
  int64_t kv_heads = 0;  // this rank's, over every layer
  int64_t model_kv_heads = 0;
  int64_t n_ctx = 0;
};

MemberNeeds member_needs(const net::GroupJoin& join, const net::ShareTable& table) {
  AssembledSource shape(join.file_name, table.model_metadata);  // tensor names and types only: no bytes
  for (const auto& t : table.tensors) shape.add(t, {}, nullptr);
  const ModelConfig c = ModelConfig::from_gguf(shape);
  const int n = static_cast<int>(join.members.size());
  ShardSpec spec;
  spec.rank = static_cast<int>(join.rank);
  spec.n_ranks = n;
  spec.tp = join.tp;
  spec.ep = join.ep;
  if (!join.shares.empty()) spec.shares = parse_shares(join.shares, n);
  MemberNeeds needs;
  // Under --tp a rank keeps the KV heads its query heads read (ModelWeights::sharded's cut).
  const auto rank_shape = [&](int64_t il) {
    LayerShape s = c.layer(il);
    if (join.tp && s.n_head_kv > 0) {
      const auto* wo = shape.find_tensor(fmt::format("blk.{}.attn_output.weight", il));
      const int64_t bs = wo == nullptr ? 1 : type_traits(wo->type).block_size;
      const AttentionCut cut =
          attention_cut(s.n_head, s.n_head_kv, s.head_dim_v, bs, spec, fmt::format("layer {}", il));
      s.n_head = cut.q1 - cut.q0;
      s.n_head_kv = cut.k1 - cut.k0;
    }
    return s;
  };
  // A --place stage's member holds its stage's layers only.
  const int64_t begin = join.layer_end > 0 ? join.layer_begin : 0;
  const int64_t end = join.layer_end > 0 ? std::min<int64_t>(join.layer_end, c.n_layer) : c.n_layer;
  for (int64_t il = begin; il < end; ++il) {
    needs.model_kv_heads += c.layer(il).n_head_kv;
    needs.kv_heads += rank_shape(il).n_head_kv;
  }
  const int64_t n_ctx = join.n_ctx > 0 ? join.n_ctx : c.n_ctx_train;
  needs.n_ctx = n_ctx;
  needs.kv = kv_cache_config(c, begin, end, join.n_slots, n_ctx, join.kv_type, kWindowBatch, rank_shape).bytes();
  constexpr int64_t kFollowerBatch = 512;
  needs.buffers = stage_buffer_bytes(c, std::max<int64_t>(kFollowerBatch, join.n_slots), n_ctx, true);
  return needs;
}

// The member's share, from its --cache or from the head (admitted against --mem-limit before any byte is sent).
GroupModel receive_share(const net::GroupJoin& join, net::Connection& head, const WorkerOptions& o,
                         const ActiveGroup& active) {
  const std::string me = fmt::format("worker {}", o.name);
  const net::Hash128 key = share_key(join);
  if (o.weights.cache_dir) {
    std::string problem;
    if (auto source = cached_share(*o.weights.cache_dir, key, join.file_name, problem)) {
      log_info("{}: its share of {} (rank {}) found in its cache {}: nothing to receive", me, join.file_name, join.rank,
               o.weights.cache_dir->string());
      return {{}, std::move(source), "its cache"};
    }
    if (!problem.empty()) log_warn("{}: its cached share is not usable ({}): receiving it again", me, problem);
  }
  head.send(net::ShareRequest{join.group_id});
  net::ShareTable table =
      expect_from_head<net::ShareTable>(head, 600s, me, "share table", active);  // the head may be sending another's
  if (table.key != key) fail("{}: the head's share table is for another layout", me);
  const MemberNeeds needs = member_needs(join, table);
  ShareReceiver receiver(std::move(table), o.weights.cache_dir, join.file_name);
  const bool by_flag = o.mem_limit > 0;
  const uint64_t limit = by_flag ? o.mem_limit : read_meminfo().available_bytes;
  const uint64_t total = receiver.bytes_needed() + needs.kv + needs.buffers;
  if (limit > 0 && total > limit) {
    const auto bytes = [](uint64_t b) { return TransferProgress::format_bytes(b); };
    fail(
        "{}: not enough memory: it may use {} ({}) and needs {}: its share of {} is {}, its KV cache {} ({} "
        "sequence(s) of {} positions, {} of the model's {} KV heads, {}) and buffers {}; refused before any was sent",
        me, bytes(limit), by_flag ? "--mem-limit" : "the memory available", bytes(total), join.file_name,
        bytes(receiver.bytes_needed()), bytes(needs.kv), join.n_slots, needs.n_ctx, needs.kv_heads,
        needs.model_kv_heads, join.kv_type == GgmlType::F32 ? "f32" : "f16", bytes(needs.buffers));
  }
  head.send(net::ShareAccept{join.group_id});
  TransferProgress progress(fmt::format("{}: receiving its share from the head", me), receiver.bytes_needed());
  while (!receiver.complete()) {
    const auto chunk = expect_from_head<net::WeightChunk>(head, 60s, me, "share chunk", active);
    receiver.receive(chunk);
    progress.update(receiver.bytes_received());
  }
  auto source = receiver.finish();
  log_info("{}: received its share of {} (rank {}): {}{}", me, join.file_name, join.rank,
           TransferProgress::format_bytes(receiver.bytes_received()),
           o.weights.cache_dir ? ", kept in its cache for the next start" : " (no --cache: sent again next time)");
  return {{}, std::move(source), fmt::format("the head ({} bytes)", receiver.bytes_received())};
}

}  // namespace

void join_group(const net::GroupJoin& join, std::shared_ptr<net::Connection> head, const WorkerOptions& o,
                PeerInbox& inbox, ActiveGroup& active) {
  const std::string me = fmt::format("worker {}", o.name);
  if (!o.follow_group) fail("{} cannot follow a tensor-parallel group", me);
  if (!o.key) {
    fail(
        "{} has no cluster key (--key-file): the members of a group link to each other, and only the key "
        "authenticates them",
        me);
  }
  GroupModel model;
  if (auto path = own_copy(join, o)) {
    model = {*path, nullptr, "its --models copy"};
  } else {
    model = receive_share(join, *head, o, active);
  }
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
  // Peers that receive their share first link late: the head, which bounds the whole start, ends a wait too long.
  const auto until = std::chrono::steady_clock::now() + std::max<std::chrono::milliseconds>(timeout, 600s);
  for (int q = rank + 1; q < n; ++q) {
    auto& m = members[static_cast<size_t>(q)];
    while (!m.link) {
      check_stop(active);
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
  head->send(net::GroupReady{join.group_id, model.from});
  LinkOptions lo;
  lo.timeout = timeout;
  lo.wire = join.wire_type;
  auto comm = std::make_shared<LinkCommunicator>(rank, std::move(members), lo);
  log_info("{}: rank {} of a group of {} over {} ({} wire), following the head", me, rank, n, join.file_name,
           net::wire_type_name(join.wire_type));
  active.set(comm);
  try {
    o.follow_group(GroupTask{join, model.path, model.source, comm, o});
  } catch (...) {
    active.clear();
    throw;
  }
  active.clear();
}

}  // namespace tessera::cluster
