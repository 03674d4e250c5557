// WorkerPool and StageReplacer: candidates are tried in the pool's order, each bounded by what is left of the
// recovery's time; a round over all of them that finds none waits (doubling, capped) before the next.
#include "cluster/stage_recovery.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <thread>

#include "cluster/local_stage_endpoint.h"
#include "cluster/stage_group.h"
#include "cluster/stage_memory.h"
#include "hw/probe.h"
#include "model/kv_cache.h"
#include "model/model_profile.h"
#include "net/handshake.h"
#include "util/error.h"
#include "util/log.h"

namespace tessera::cluster {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

WorkerPool::Entry& WorkerPool::entry(const std::string& address) {
  for (auto& e : entries_) {
    if (e.address == address) return e;
  }
  entries_.push_back({address, false, {}});
  return entries_.back();
}

void WorkerPool::add_busy(const std::string& address) {
  std::lock_guard lock(mutex_);
  entry(address).busy = true;
}

void WorkerPool::add_spare(const std::string& address) {
  std::lock_guard lock(mutex_);
  entry(address);
}

std::vector<std::string> WorkerPool::candidates() const {
  std::lock_guard lock(mutex_);
  std::vector<const Entry*> free;
  for (const auto& e : entries_) {
    if (!e.busy) free.push_back(&e);
  }
  std::stable_sort(free.begin(), free.end(),
                   [](const Entry* a, const Entry* b) { return a->failed_at < b->failed_at; });
  std::vector<std::string> out;
  for (const Entry* e : free) out.push_back(e->address);
  return out;
}

bool WorkerPool::try_claim(const std::string& address) {
  std::lock_guard lock(mutex_);
  Entry& e = entry(address);
  if (e.busy) return false;
  e.busy = true;
  return true;
}

void WorkerPool::release(const std::string& address, bool failed) {
  std::lock_guard lock(mutex_);
  Entry& e = entry(address);
  e.busy = false;
  if (failed) e.failed_at = Clock::now();
}

StageReplacer::StageReplacer(std::shared_ptr<const ModelWeights> model, std::shared_ptr<WorkerPool> pool,
                             ReplacementOptions options)
    : model_(std::move(model)), pool_(std::move(pool)), options_(std::move(options)) {}

uint64_t StageReplacer::stage_bytes(LayerRange layers, bool first, bool last) const {
  const ModelConfig& c = model_->config();
  const ModelProfile p = profile_model(model_->source(), c);
  uint64_t bytes = first ? p.embd_bytes : 0;
  if (last) bytes += p.output_bytes + (c.tied_output && !first ? p.embd_bytes : 0);
  for (int64_t l = layers.begin; l < layers.end; ++l) bytes += p.layer_bytes.at(static_cast<size_t>(l));
  const StageOptions& so = options_.local_stage;
  bytes += kv_cache_config(c, layers.begin, layers.end, so.n_slots, so.n_ctx, so.kv_type).bytes();
  bytes += stage_buffer_bytes(c, options_.remote.max_batch, so.n_ctx, last);
  return bytes;
}

std::unique_ptr<StageEndpoint> StageReplacer::make(const std::string& address, int index, LayerRange layers, bool first,
                                                   bool last, CompletionQueue& done, Clock::time_point deadline) const {
  if (address == kLocalSpare) {
    const uint64_t need = stage_bytes(layers, first, last);
    const uint64_t have = read_meminfo().available_bytes;
    if (have > 0 && need > have) {
      fail("the stage needs {} MiB and this process may use {} MiB", need >> 20, have >> 20);
    }
    auto w = ModelWeights::load(model_->file().name(), layers, first, last);
    return std::make_unique<LocalStageEndpoint>("local", index, std::move(w), options_.local_stage,
                                                options_.local_threads, done, options_.local_pin);
  }
  RemoteStageOptions ro = options_.remote;
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  ro.connect_timeout = std::clamp(left, 100ms, ro.connect_timeout);
  ro.measure_bytes = 0;  // the RTT is enough; the bandwidth probe would only delay the replay
  ro.progress = nullptr;
  return std::make_unique<RemoteStageEndpoint>(address, address, options_.key ? &*options_.key : nullptr, index,
                                               *model_, layers, first, last, ro, done);
}

namespace {

// Whether a worker answers a head's handshake within `limit` (a leader whose group broke takes a moment to end its
// session and be ready again).
bool answers(const std::string& address, const net::ClusterKey* key, Clock::time_point limit) {
  for (;;) {
    try {
      auto link = net::connect(address, key, 500ms);
      net::client_handshake(*link, net::make_hello(net::Role::Head, "head"), 1000ms);
      link->close("recovery: checking that it is there");
      return true;
    } catch (const std::exception&) {
      if (Clock::now() + 300ms >= limit) return false;
      std::this_thread::sleep_for(300ms);
    }
  }
}

}  // namespace

std::unique_ptr<StageEndpoint> StageReplacer::reform(int index, LayerRange layers, bool first, bool last,
                                                     CompletionQueue& done, Clock::time_point deadline) {
  const auto it = options_.groups.find(index);
  if (it == options_.groups.end()) return nullptr;
  StageGroupPlan plan = it->second;
  // The head, when it leads, is alive: only its members are checked and replaced.
  const bool head_leads = plan.head_join.has_value();
  const net::ClusterKey* key = options_.key ? &*options_.key : nullptr;
  const auto probe_until = std::min(deadline, Clock::now() + 3s);
  std::vector<size_t> dead;
  for (size_t i = head_leads ? 1 : 0; i < plan.nodes.size(); ++i) {
    if (!answers(plan.nodes[i].address, key, probe_until)) dead.push_back(i);
  }
  if (dead.empty() || dead.size() == plan.nodes.size()) return nullptr;
  // A spare worker for each dead node, in the pool's order.
  std::vector<std::string> claimed;
  for (const std::string& address : pool_->candidates()) {
    if (claimed.size() == dead.size()) break;
    if (address != kLocalSpare && pool_->try_claim(address)) claimed.push_back(address);
  }
  if (claimed.size() < dead.size()) {
    for (const auto& a : claimed) pool_->release(a, false);
    return nullptr;
  }
  std::string was;
  for (size_t k = 0; k < dead.size(); ++k) {
    net::GroupMember& m = plan.nodes[dead[k]];
    was += fmt::format("{}{} in {}'s place", was.empty() ? "" : ", ", claimed[k], m.name);
    pool_->release(m.address, true);
    // A spare is named by its address, as a node name may be written ("127.0.0.1_50052").
    std::string name = claimed[k];
    for (char& ch : name) {
      if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '.' && ch != '-') ch = '_';
    }
    m = {name, claimed[k]};
  }
  try {
    std::unique_ptr<StageEndpoint> stage;
    if (head_leads) {
      stage = lead_group(index, layers, first, last, plan, done);
    } else {
      RemoteStageOptions ro = options_.remote;
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      ro.connect_timeout = std::clamp(left, 100ms, ro.connect_timeout);
      ro.measure_bytes = 0;
      ro.progress = nullptr;
      ro.group.assign(plan.nodes.begin() + 1, plan.nodes.end());
      ro.group_tp = plan.tp;
      ro.group_ep = plan.ep;
      ro.group_shares = plan.shares;
      ro.group_ep_redundancy = plan.ep_redundancy;
      ro.group_timeout_s = plan.timeout_s;
      ro.model_hash = plan.model_hash;
      const std::string leader = plan.nodes.front().address;
      stage = std::make_unique<RemoteStageEndpoint>(leader, leader, key, index, *model_, layers, first, last, ro, done);
    }
    log_info("recovery: stage {} (layers {}-{}) re-formed as its group again, led by {}: {}", index, layers.begin,
             layers.end - 1, plan.nodes.front().name, was);
    it->second = std::move(plan);
    return stage;
  } catch (const std::exception& e) {
    log_warn("recovery: stage {} could not re-form its group ({}): one node takes it", index, e.what());
    for (const auto& a : claimed) pool_->release(a, true);
    return nullptr;
  }
}

std::unique_ptr<StageEndpoint> StageReplacer::lead_group(int index, LayerRange layers, bool first, bool last,
                                                         const StageGroupPlan& plan, CompletionQueue& done) const {
  if (!options_.key) fail("stage {}: a group needs the cluster key", index);
  const net::GroupJoin& join = *plan.head_join;
  const int n = static_cast<int>(plan.nodes.size());
  std::vector<GroupWorker> members;
  for (size_t i = 1; i < plan.nodes.size(); ++i) members.push_back({plan.nodes[i].name, plan.nodes[i].address});
  // As at start: a member without the model (a spare, say) receives its share from the head's copy of the layers.
  auto weights = ModelWeights::load(model_->file().name(), layers, first, last);
  auto group = start_stage_group(join, "head", members, *options_.key, stage_shares(weights, join, n));
  StageOptions so = options_.local_stage;
  so.shard = stage_group_shard(join, 0, n);
  return std::make_unique<LocalStageEndpoint>("local", index, std::move(weights), so, options_.local_threads, done,
                                              options_.local_pin, std::move(group));
}

std::unique_ptr<StageEndpoint> StageReplacer::take_on_head(int index, LayerRange layers, bool first, bool last,
                                                           CompletionQueue& done, Clock::time_point deadline) {
  const auto it = options_.groups.find(index);
  if (it == options_.groups.end() || !it->second.head_join) return nullptr;
  try {
    auto stage = make(kLocalSpare, index, layers, first, last, done, deadline);
    log_info(
        "recovery: stage {} (layers {}-{}) now runs on local alone, its layers whole (its group could not re-form)",
        index, layers.begin, layers.end - 1);
    // No group any more: its members (live or not) are the pool's again, tried after the never-failed ones.
    for (size_t i = 1; i < it->second.nodes.size(); ++i) pool_->release(it->second.nodes[i].address, true);
    options_.groups.erase(it);
    return stage;
  } catch (const std::exception& e) {
    log_warn("recovery: the head cannot take stage {} (layers {}-{}) whole ({}): trying the spares", index,
             layers.begin, layers.end - 1, e.what());
    return nullptr;
  }
}

std::unique_ptr<StageEndpoint> StageReplacer::replace(int index, const StageEndpoint& failed, bool first, bool last,
                                                      CompletionQueue& done, Clock::time_point deadline) {
  // A group stage: its live nodes again with spares in the dead ones' places, when enough spares are free.
  if (auto stage = reform(index, failed.layers(), first, last, done, deadline)) return stage;
  // A group the head led: the head, already holding a share, takes the rest before any spare is asked.
  if (auto stage = take_on_head(index, failed.layers(), first, last, done, deadline)) return stage;
  if (const std::string old = failed.where(); !old.empty()) pool_->release(old, true);
  auto backoff = 100ms;
  std::map<std::string, std::string> last_error;  // per candidate: its latest failure
  for (;;) {
    for (const std::string& address : pool_->candidates()) {
      if (Clock::now() >= deadline) break;
      if (!pool_->try_claim(address)) continue;
      try {
        auto stage = make(address, index, failed.layers(), first, last, done, deadline);
        log_info("recovery: stage {} (layers {}-{}) now runs on {}", index, failed.layers().begin,
                 failed.layers().end - 1, address);
        return stage;
      } catch (const std::exception& e) {
        pool_->release(address, true);
        last_error[address] = e.what();
      }
    }
    const auto left = deadline - Clock::now();
    if (left <= 0ms) break;
    std::this_thread::sleep_for(std::min<Clock::duration>(backoff, left));
    backoff = std::min(backoff * 2, options_.max_backoff);
  }
  std::string tried;
  for (const auto& [address, error] : last_error) tried += fmt::format("; {}: {}", address, error);
  fail("no worker took stage {} (layers {}-{}) in time{}", index, failed.layers().begin, failed.layers().end - 1,
       tried.empty() ? std::string(" (no free worker or spare)") : tried);
}

}  // namespace tessera::cluster
