// Replicas and the least-loaded router.
#include "server/replica.h"

#include <algorithm>
#include <fstream>
#include <numeric>
#include <sstream>

#include "model/model_profile.h"
#include "util/error.h"
#include "util/log.h"

namespace tessera::server {

namespace {

uint64_t physical_memory() {
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("MemTotal:", 0) == 0) {
      std::istringstream s(line.substr(9));
      uint64_t kib = 0;
      s >> kib;
      return kib * 1024;
    }
  }
  return 0;
}

}  // namespace

NodeInfo local_node_info(const ModelWeights& weights, const LocalExecutor& executor) {
  NodeInfo n;
  n.name = "local";
  n.layers = weights.layers();
  n.embedding = weights.has_embedding();
  n.head = weights.has_head();
  n.weight_bytes = profile_model(weights.file(), weights.config()).weight_bytes;
  n.kv_bytes = executor.stage().cache().bytes();
  n.memory_capacity = physical_memory();
  return n;
}

Replica::Replica(int id, ReplicaSpec spec, const Tokenizer& tokenizer, const SchedulerOptions& options)
    : id_(id), spec_(std::move(spec)) {
  if (!spec_.executor) fail("replica {} has no executor", id);
  scheduler_ = std::make_unique<Scheduler>(*spec_.executor, tokenizer, options);
}

std::optional<collective::CollectiveStats> Replica::collectives() const {
  const auto* local = dynamic_cast<const LocalExecutor*>(spec_.executor.get());
  if (local == nullptr || local->communicator() == nullptr) return std::nullopt;
  return local->communicator()->stats();
}

std::vector<NodeLive> Replica::live() const {
  if (spec_.live) {
    auto v = spec_.live();
    v.resize(spec_.nodes.size());
    return v;
  }
  return std::vector<NodeLive>(spec_.nodes.size());
}

bool Replica::healthy() const {
  if (scheduler_->stats().consecutive_failures >= 3) return false;
  const auto nodes = live();
  return std::all_of(nodes.begin(), nodes.end(), [](const NodeLive& n) { return n.up; });
}

Router::~Router() {
  std::lock_guard lock(mutex_);
  closing_ = true;
}

void Router::add(std::shared_ptr<Replica> replica) {
  replica->scheduler().set_mover(
      [this, from = replica->id()](std::unique_ptr<Scheduler::Sequence>& s) { return move(from, s); });
  std::lock_guard lock(mutex_);
  replicas_.push_back(std::move(replica));
}

bool Router::move(int from, std::unique_ptr<Scheduler::Sequence>& s) {
  std::lock_guard lock(mutex_);
  if (closing_) return false;
  std::vector<std::pair<double, Replica*>> order;
  for (const auto& r : replicas_) {
    if (r->id() != from && r->healthy()) order.emplace_back(r->scheduler().load(), r.get());
  }
  std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const auto& [load, r] : order) {
    if (r->scheduler().adopt(s)) {
      log_info("router: a request of replica {} moved to replica {}, where it continues", from, r->id());
      return true;
    }
  }
  log_warn("router: no healthy replica can take over a request of replica {}", from);
  return false;
}

std::vector<std::shared_ptr<Replica>> Router::replicas() const {
  std::lock_guard lock(mutex_);
  return replicas_;
}

size_t Router::size() const {
  std::lock_guard lock(mutex_);
  return replicas_.size();
}

Router::Routed Router::submit(const SequenceRequest& request, const SequenceCallbacks& callbacks) {
  const auto all = replicas();
  if (all.empty()) return {};
  std::lock_guard lock(submit_mutex_);
  struct Choice {
    bool healthy;
    double load;
    size_t rank;  // rotation among equals
    size_t index;
  };
  const uint64_t turn = turn_++;
  std::vector<Choice> order;
  for (size_t i = 0; i < all.size(); ++i) {
    order.push_back(
        {all[i]->healthy(), all[i]->scheduler().load(), (i + all.size() - turn % all.size()) % all.size(), i});
  }
  std::sort(order.begin(), order.end(), [](const Choice& a, const Choice& b) {
    if (a.healthy != b.healthy) return a.healthy;
    if (a.load != b.load) return a.load < b.load;
    return a.rank < b.rank;
  });
  for (const auto& c : order) {
    auto handle = all[c.index]->scheduler().submit(request, callbacks);
    if (handle) return {std::move(handle), all[c.index]->id()};
  }
  return {};
}

}  // namespace tessera::server
