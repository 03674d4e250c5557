// PipelineExecutor's faults: deadlines on the watched stages' jobs, and recovery by replay (a failed stage is
// replaced, every sequence's tokens run through the pipeline again to rebuild the KV caches, and the steps that
// waited run again with the sampler states they had, so their tokens are the ones an undisturbed run gives).
#include <thread>

#include "cluster/micro_batches.h"
#include "cluster/pipeline_executor.h"
#include "util/allocator.h"
#include "util/error.h"
#include "util/log.h"

namespace tessera::cluster {

using Clock = std::chrono::steady_clock;

namespace {

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// The sequences of a batch, "3, 5" (the scheduler's error names their requests).
std::string sequences_of(const Batch& b) {
  std::vector<int32_t> seqs(b.seq.begin(), b.seq.end());
  std::sort(seqs.begin(), seqs.end());
  seqs.erase(std::unique(seqs.begin(), seqs.end()), seqs.end());
  std::string out;
  for (int32_t s : seqs) out += (out.empty() ? "" : ", ") + std::to_string(s);
  return out;
}

}  // namespace

void PipelineExecutor::send(size_t stage, StageJob job) {
  if (stages_[stage]->watched()) {
    Watch& w = watch_[stage];
    w.jobs.push_back({job.id, job.batch.size(), Clock::now()});
  }
  stages_[stage]->submit(std::move(job));
}

void PipelineExecutor::watch_done(const StageDone& d) {
  const auto s = static_cast<size_t>(d.stage);
  if (s >= watch_.size()) return;
  Watch& w = watch_[s];
  const auto it = std::find_if(w.jobs.begin(), w.jobs.end(), [&](const Watch::Job& j) { return j.id == d.id; });
  if (it == w.jobs.end()) return;
  const auto now = Clock::now();
  const bool front = it == w.jobs.begin();
  if (front && d.error.empty()) w.times.observe(seconds(now - it->start));
  w.jobs.erase(it);
  // The next job could not start before this one was done.
  if (front && !w.jobs.empty()) w.jobs.front().start = std::max(w.jobs.front().start, now);
}

std::optional<StageDone> PipelineExecutor::next_completion() {
  // The earliest deadline among the watched stages' oldest jobs.
  Clock::time_point earliest = Clock::time_point::max();
  for (size_t s = 0; s < stages_.size(); ++s) {
    const Watch& w = watch_[s];
    if (w.jobs.empty() || stages_[s]->failed()) continue;
    const auto& times = stages_[s]->batch_times();
    const double predicted = times.empty() ? 0.0 : batch_seconds(times, w.jobs.front().tokens);
    const auto limit =
        std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(w.times.limit(predicted)));
    earliest = std::min(earliest, w.jobs.front().start + limit);
  }
  if (earliest == Clock::time_point::max()) return done_.pop();
  if (auto d = done_.pop_until(earliest)) return d;
  const auto now = Clock::now();
  for (size_t s = 0; s < stages_.size(); ++s) {
    Watch& w = watch_[s];
    if (w.jobs.empty() || stages_[s]->failed()) continue;
    const auto& times = stages_[s]->batch_times();
    const double predicted = times.empty() ? 0.0 : batch_seconds(times, w.jobs.front().tokens);
    const double limit = w.times.limit(predicted);
    const double took = seconds(now - w.jobs.front().start);
    if (took < limit) continue;
    const auto job = jobs_.find(w.jobs.front().id);
    const std::string seqs =
        job == jobs_.end() ? std::string("?") : sequences_of(steps_.at(job->second.first).parts[job->second.second]);
    const std::string why = fmt::format(
        "worker {} ({}) missed its step deadline: job {} (sequences {}) took over {:.2f} s where {:.1f} ms was "
        "expected (limit {:g} x expected + {:g} s)",
        stages_[s]->node(), stages_[s]->where(), w.jobs.front().id, seqs, took, w.times.expected(predicted) * 1e3,
        w.times.options().factor, w.times.options().slack_seconds);
    log_warn("{}", why);
    last_miss_ = {took, limit};
    w.jobs.clear();
    stages_[s]->abandon(why);
  }
  return std::nullopt;
}

void PipelineExecutor::replace_failed(Clock::time_point deadline) {
  for (size_t i = 0; i < stages_.size(); ++i) {
    if (!stages_[i]->failed()) continue;
    auto fresh = factory_(static_cast<int>(i), *stages_[i], i == 0, i + 1 == stages_.size(), done_, deadline);
    {
      std::lock_guard lock(stages_mutex_);
      std::swap(stages_[i], fresh);
    }
    fresh.reset();                                           // the failed endpoint: its thread joined, its link closed
    watch_[i] = Watch{{}, StepDeadline(options_.deadline)};  // the new node's times are its own
    ++failovers_;
  }
}

void PipelineExecutor::replay() {
  replaying_ = true;
  struct Reset {
    bool& flag;
    ~Reset() { flag = false; }
  } reset{replaying_};
  // The sequences of the waiting steps: a surviving stage may hold positions of theirs that the head never
  // committed (the step ran there before it failed elsewhere), even for a sequence without history yet.
  std::vector<char> waiting(history_.size(), 0);
  for (const auto& [ticket, step] : steps_) {
    if (!step.waiting) continue;
    for (const auto& [seq, len] : step.next) waiting[static_cast<size_t>(seq)] = 1;
  }
  for (size_t seq = 0; seq < history_.size(); ++seq) {
    const std::vector<int32_t> tokens = history_[seq];
    if (tokens.empty() && !waiting[seq]) continue;
    // The surviving stages drop what the replay rebuilds, so every stage holds the same positions again.
    for (auto& s : stages_) s->clear_sequence(static_cast<int64_t>(seq));
    lengths_[seq] = 0;
    const auto chunk = static_cast<size_t>(std::max<int64_t>(1, options_.replay_chunk));
    for (size_t begin = 0; begin < tokens.size(); begin += chunk) {
      const size_t end = std::min(tokens.size(), begin + chunk);
      Batch b;
      for (size_t t = begin; t < end; ++t) {
        b.add(tokens[t], static_cast<int32_t>(seq), static_cast<int32_t>(t), t + 1 == end);
      }
      Finished f = wait_for(start(b, {}, false, true));
      if (!f.error.empty()) fail("replaying sequence {}: {}", seq, f.error);
    }
    replayed_tokens_ += tokens.size();
  }
}

bool PipelineExecutor::recover(std::chrono::milliseconds budget) {
  recovering_ = true;
  // What broke, once (the steps that wait say the same of one stage), before the lines of its replacement.
  for (const auto& [ticket, step] : steps_) {
    if (!step.waiting || step.error.empty()) continue;
    log_warn("recovery: {}", step.error);
    break;
  }
  const auto t0 = Clock::now();
  const auto deadline = t0 + budget;
  std::string why;
  bool ok = false;
  for (;;) {
    try {
      replace_failed(deadline);
      replay();
      ok = true;
      break;
    } catch (const std::exception& e) {
      why = e.what();
      if (Clock::now() >= deadline) break;
      log_warn("recovery: {}; trying again", why);
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  // The failed endpoint is gone and the new one made: what the swap left free goes back to the system, or each
  // failover would leave a few hundred KiB of resident holes (docs/perf-log/recovery.md).
  release_free_memory();
  if (ok) {
    log_info("recovery: the pipeline stands again after {:.2f} s; {} step(s) run again", seconds(Clock::now() - t0),
             waiting_);
  } else {
    log_warn("recovery failed after {:.1f} s: {}", seconds(Clock::now() - t0), why);
  }
  std::vector<uint64_t> tickets;
  for (const auto& [ticket, step] : steps_) {
    if (step.waiting) tickets.push_back(ticket);
  }
  waiting_ = 0;
  for (uint64_t ticket : tickets) {
    Step& step = steps_.at(ticket);
    step.waiting = false;
    if (!ok) {
      step.error = fmt::format("{} (recovery failed after {:.1f} s: {})", step.error, seconds(Clock::now() - t0), why);
      complete(ticket);
      continue;
    }
    // The same parts with the same sampler states, as if the fault had not happened.
    for (const auto& [seq, len] : step.next) in_flight_[static_cast<size_t>(seq)] = 1;
    step.error.clear();
    step.fault = false;
    step.results.assign(step.parts.size(), StageDone{});
    step.outstanding = step.parts.size();
    for (size_t j = 0; j < step.parts.size(); ++j) {
      const uint64_t id = ++last_job_;
      jobs_[id] = {ticket, j};
      StageJob job{id, step.parts[j], {}, {}};
      if (stages_.size() == 1) job.sampling = step.sampling[j];
      send(0, std::move(job));
    }
  }
  recovering_ = false;
  return ok;
}

void PipelineExecutor::heal() {
  if (!factory_ || !steps_.empty() || Clock::now() < next_heal_) return;
  if (std::none_of(stages_.begin(), stages_.end(), [](const auto& s) { return s->failed(); })) return;
  using std::chrono::milliseconds;
  if (recover(std::min(options_.recovery_timeout, milliseconds(5000)))) {
    heal_backoff_ = milliseconds(1000);
    next_heal_ = {};
  } else {
    next_heal_ = Clock::now() + heal_backoff_;
    heal_backoff_ = std::min(heal_backoff_ * 2, milliseconds(60000));
  }
}

}  // namespace tessera::cluster
