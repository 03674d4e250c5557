// WorkerPool and StageReplacer: candidates are tried in the pool's order, each bounded by what is left of the
// recovery's time; a round over all of them that finds none waits (doubling, capped) before the next.
#include "cluster/stage_recovery.h"

#include <algorithm>
#include <map>
#include <thread>

#include "cluster/local_stage_endpoint.h"
#include "cluster/stage_memory.h"
#include "hw/probe.h"
#include "model/kv_cache.h"
#include "model/model_profile.h"
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
                                                options_.local_threads, done);
  }
  RemoteStageOptions ro = options_.remote;
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  ro.connect_timeout = std::clamp(left, 100ms, ro.connect_timeout);
  ro.measure_bytes = 0;  // the RTT is enough; the bandwidth probe would only delay the replay
  ro.progress = nullptr;
  return std::make_unique<RemoteStageEndpoint>(address, address, options_.key ? &*options_.key : nullptr, index,
                                               *model_, layers, first, last, ro, done);
}

std::unique_ptr<StageEndpoint> StageReplacer::replace(int index, const StageEndpoint& failed, bool first, bool last,
                                                      CompletionQueue& done, Clock::time_point deadline) {
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
