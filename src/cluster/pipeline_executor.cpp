// PipelineExecutor: submits every micro-batch to the first stage at once (stages run jobs in order), and moves each
// completed micro-batch on to the next stage as soon as it arrives, so all stages stay busy. Several steps (batches
// of disjoint sequences) may be in flight; their parts share the stages' queues.
#include "cluster/pipeline_executor.h"

#include <algorithm>
#include <map>

#include "cluster/micro_batches.h"
#include "net/messages.h"
#include "util/error.h"

namespace tessera::cluster {

PipelineExecutor::PipelineExecutor(ModelConfig config, int64_t n_ctx, int64_t n_slots, PipelineOptions options)
    : config_(std::move(config)),
      n_ctx_(n_ctx),
      n_slots_(n_slots),
      options_(options),
      lengths_(static_cast<size_t>(n_slots), 0),
      in_flight_(static_cast<size_t>(n_slots), 0),
      history_(static_cast<size_t>(n_slots)) {}

void PipelineExecutor::add_stage(std::unique_ptr<StageEndpoint> stage) {
  std::lock_guard lock(stages_mutex_);
  stages_.push_back(std::move(stage));
  watch_.push_back(Watch{{}, StepDeadline(options_.deadline)});
}

void PipelineExecutor::visit_stages(const std::function<void(size_t, const StageEndpoint&)>& f) const {
  std::lock_guard lock(stages_mutex_);
  for (size_t i = 0; i < stages_.size(); ++i) f(i, *stages_[i]);
}

void PipelineExecutor::check_complete() const {
  int64_t next = 0;
  for (const auto& s : stages_) {
    if (s->layers().begin != next) {
      fail("stage on node {} starts at layer {}, expected layer {}", s->node(), s->layers().begin, next);
    }
    next = s->layers().end;
  }
  if (next != config_.n_layer) fail("the stages cover layers 0-{} of the model's {}", next - 1, config_.n_layer);
}

// Cuts parts (in order, so a sequence's tokens keep theirs) that a Forward or ForwardResult could not carry:
// too many tokens, activations or logits over half a message's matrix limit (perplexity asks for every row).
std::vector<Batch> PipelineExecutor::cap(std::vector<Batch> parts) const {
  const size_t budget = net::kMaxChunkBytes / 2;
  // The widest stage boundary: Gemma 4 carries per-layer inputs and reused K/V rows beside the hidden state.
  int64_t width = config_.n_embd;
  for (const auto& s : stages_) width = std::max(width, config_.boundary_width(s->layers().begin));
  const auto max_tokens = static_cast<int64_t>(
      std::min<size_t>(net::kMaxBatchTokens, budget / (sizeof(float) * static_cast<size_t>(width))));
  const auto max_outputs = static_cast<int64_t>(budget / (sizeof(float) * static_cast<size_t>(config_.n_vocab)));
  std::vector<Batch> out;
  for (auto& part : parts) {
    if (part.size() <= max_tokens && part.n_outputs() <= max_outputs) {
      out.push_back(std::move(part));
      continue;
    }
    Batch piece;
    int64_t outputs = 0;
    for (int64_t t = 0; t < part.size(); ++t) {
      const auto tt = static_cast<size_t>(t);
      const bool wants = part.want_logits[tt] != 0;
      if (piece.size() == max_tokens || (wants && outputs == max_outputs)) {
        out.push_back(std::move(piece));
        piece = Batch();
        outputs = 0;
      }
      piece.add(part.tokens.empty() ? 0 : part.tokens[tt], part.seq[tt], part.pos[tt], wants);
      outputs += wants ? 1 : 0;
    }
    if (piece.size() > 0) out.push_back(std::move(piece));
  }
  return out;
}

std::vector<Batch> PipelineExecutor::split(const Batch& batch, bool by_sequence) const {
  return cap(split_parts(batch, by_sequence));
}

std::vector<Batch> PipelineExecutor::split_parts(const Batch& batch, bool by_sequence) const {
  const int64_t n = batch.size();
  const auto stages = static_cast<int64_t>(std::max<size_t>(1, stages_.size()));
  std::vector<Batch> out;
  if (stages == 1 || n == 1) {
    out.push_back(batch);
    return out;
  }
  std::map<int32_t, int64_t> per_seq;
  for (int32_t s : batch.seq) ++per_seq[s];
  if (per_seq.size() > 1 && !by_sequence) {
    out.push_back(batch);
    return out;
  }
  if (per_seq.size() > 1) {
    // Whole sequences per micro-batch, about `stages` groups: a sequence's tokens stay in order in one group.
    const int64_t groups = std::min<int64_t>(stages, static_cast<int64_t>(per_seq.size()));
    std::map<int32_t, int64_t> group_of;
    int64_t i = 0;
    for (const auto& [seq, count] : per_seq) group_of[seq] = (i++) * groups / static_cast<int64_t>(per_seq.size());
    out.resize(static_cast<size_t>(groups));
    for (int64_t t = 0; t < n; ++t) {
      const auto g = static_cast<size_t>(group_of[batch.seq[static_cast<size_t>(t)]]);
      const auto tt = static_cast<size_t>(t);
      out[g].add(batch.tokens.empty() ? 0 : batch.tokens[tt], batch.seq[tt], batch.pos[tt], batch.want_logits[tt]);
    }
    return out;
  }
  // One sequence: chunks in order. Enough chunks to fill the pipeline, but not so small that matmuls lose efficiency:
  // the stages' measured batch times weigh the two.
  int64_t start = 0;
  for (int64_t size : prompt_cut(n)) {
    Batch b;
    for (int64_t t = start; t < start + size; ++t) {
      const auto tt = static_cast<size_t>(t);
      b.add(batch.tokens.empty() ? 0 : batch.tokens[tt], batch.seq[tt], batch.pos[tt], batch.want_logits[tt]);
    }
    start += size;
    out.push_back(std::move(b));
  }
  return out;
}

std::vector<int64_t> PipelineExecutor::prompt_cut(int64_t n) const {
  const auto n_stages = static_cast<int64_t>(std::max<size_t>(1, stages_.size()));
  std::vector<int64_t> rule = prompt_chunks(n, n_stages, options_.micro_batch);
  if (options_.micro_batch > 0 || stages_.size() < 2) return rule;
  std::vector<std::vector<BatchTime>> times;
  for (const auto& s : stages_) times.push_back(s->batch_times());
  return fastest_prompt_chunks(n, times, std::move(rule));
}

// The user's size cuts evenly. The automatic size m gives each stage about four chunks, and the first and last
// chunks are half of it: in front of a slower stage the halved first one starts it sooner, behind one the halved
// last one drains sooner (over equal stages it changes nothing: the later stage trails by a full chunk).
std::vector<int64_t> PipelineExecutor::prompt_chunks(int64_t n, int64_t stages, int64_t micro_batch) {
  if (micro_batch > 0) return cut_prompt(n, micro_batch, 0);
  const int64_t m = std::max<int64_t>(16, (n + 4 * stages - 1) / (4 * stages));
  const int64_t end = m / 2 >= 16 && n >= 3 * m ? m / 2 : 0;  // below 16 tokens a chunk's matmuls lose efficiency
  return cut_prompt(n, m, end);
}

std::vector<std::pair<int32_t, int64_t>> PipelineExecutor::check_batch(const Batch& batch) const {
  if (stages_.empty()) fail("the pipeline has no stages");
  // Validate what every stage would check, before anything is sent, so a bad batch changes nothing anywhere.
  std::map<int32_t, int64_t> next;
  for (int64_t t = 0; t < batch.size(); ++t) {
    const int32_t s = batch.seq[static_cast<size_t>(t)];
    const int32_t p = batch.pos[static_cast<size_t>(t)];
    if (s < 0 || s >= n_slots_) fail("token {} names sequence {}, but only {} are allowed", t, s, n_slots_);
    // A replay rebuilds sequences whose steps wait for it.
    if (in_flight_[static_cast<size_t>(s)] && !replaying_) fail("sequence {} is already in a step in flight", s);
    if (p >= n_ctx_) fail("sequence {} reached the context limit of {} tokens (raise -c)", s, n_ctx_);
    auto [it, fresh] = next.try_emplace(s, lengths_[static_cast<size_t>(s)]);
    if (p != it->second) fail("sequence {}: token at position {}, expected position {}", s, p, it->second);
    ++it->second;
  }
  return {next.begin(), next.end()};
}

uint64_t PipelineExecutor::start(const Batch& batch, std::span<const SampleRequest> requests, bool sampled,
                                 bool by_sequence) {
  Step step;
  step.next = check_batch(batch);
  if (sampled && requests.size() != static_cast<size_t>(batch.n_outputs())) {
    fail("{} sampling requests for a batch with {} output tokens", requests.size(), batch.n_outputs());
  }
  step.batch = batch;
  step.parts = split(batch, by_sequence);
  step.rows = output_rows(batch, step.parts);
  step.sampled = sampled;
  step.sampling.resize(step.parts.size());
  if (sampled) {
    // The last stage samples from each sampler's state; a request goes with the part holding its output token.
    for (size_t j = 0; j < step.parts.size(); ++j) {
      std::map<int32_t, int> outputs;
      size_t r = 0;
      for (int64_t t = 0; t < step.parts[j].size(); ++t) {
        const auto tt = static_cast<size_t>(t);
        if (!step.parts[j].want_logits[tt]) continue;
        const int32_t seq = step.parts[j].seq[tt];
        if (++outputs[seq] > 1) fail("sequence {} has several output tokens in one batch; sampling takes one", seq);
        const SampleRequest& req = requests[step.rows[j][r++]];
        step.sampling[j].push_back({seq, req.sampler->state(), req.top_logprobs});
      }
    }
    for (const SampleRequest& r : requests) step.samplers.push_back(r.sampler);
  }
  step.results.resize(step.parts.size());
  step.outstanding = step.parts.size();

  const uint64_t ticket = ++last_ticket_;
  for (const auto& [seq, len] : step.next) in_flight_[static_cast<size_t>(seq)] = 1;
  Step& s = steps_.emplace(ticket, std::move(step)).first->second;
  const bool one_stage = stages_.size() == 1;
  for (size_t j = 0; j < s.parts.size(); ++j) {
    const uint64_t id = ++last_job_;
    jobs_[id] = {ticket, j};
    StageJob job{id, s.parts[j], {}, {}};
    if (one_stage) job.sampling = s.sampling[j];  // a copy: the step may run again after a recovery
    send(0, std::move(job));
  }
  return ticket;
}

void PipelineExecutor::pump() {
  std::optional<StageDone> got = next_completion();
  if (!got) return;  // a stage was abandoned: its jobs' failures are on the queue
  StageDone& d = *got;
  watch_done(d);
  const auto where = jobs_.find(d.id);
  if (where == jobs_.end()) return;  // a late answer of a stage that was abandoned or replaced
  const auto [ticket, part] = where->second;
  jobs_.erase(where);
  Step& step = steps_.at(ticket);
  const auto stage = static_cast<size_t>(d.stage);
  const auto next_stage = stage + 1;
  if (!d.error.empty()) {
    if (step.error.empty()) step.error = d.error;
    if (stage < stages_.size() && stages_[stage]->failed()) step.fault = true;
  } else if (next_stage < stages_.size() && step.error.empty()) {
    const uint64_t id = ++last_job_;
    jobs_[id] = {ticket, part};
    StageJob job{id, step.parts[part], std::move(d.hidden), {}};
    if (next_stage + 1 == stages_.size()) job.sampling = step.sampling[part];  // a copy, as in start()
    send(next_stage, std::move(job));
    return;
  } else {
    step.results[part] = std::move(d);
  }
  if (--step.outstanding > 0) return;
  if (step.fault && factory_ && !replaying_) {
    // Wait for the other steps in flight to drain (their parts fail on the broken stage or finish), then recover.
    step.waiting = true;
    ++waiting_;
  } else {
    complete(ticket);
  }
  if (waiting_ > 0 && jobs_.empty() && !replaying_) recover(options_.recovery_timeout);
}

void PipelineExecutor::complete(uint64_t ticket) {
  auto node = steps_.extract(ticket);
  Step& step = node.mapped();
  for (const auto& [seq, len] : step.next) in_flight_[static_cast<size_t>(seq)] = 0;
  Finished f;
  f.ticket = ticket;
  f.error = step.error;
  const auto n_vocab = static_cast<size_t>(config_.n_vocab);
  if (f.error.empty()) {
    try {
      if (step.sampled) {
        f.sampled.assign(step.samplers.size(), SampledToken{});
        for (size_t j = 0; j < step.parts.size(); ++j) {
          if (step.results[j].sampled.size() != step.rows[j].size()) {
            fail("stage on node {} returned {} sampled tokens for {} requests", stages_.back()->node(),
                 step.results[j].sampled.size(), step.rows[j].size());
          }
          for (size_t r = 0; r < step.rows[j].size(); ++r) {
            f.sampled[step.rows[j][r]] = std::move(step.results[j].sampled[r]);
          }
        }
      } else {
        f.logits.resize(static_cast<size_t>(step.batch.n_outputs()) * n_vocab);
        for (size_t j = 0; j < step.parts.size(); ++j) {
          const auto& logits = step.results[j].logits;
          if (logits.size() != step.rows[j].size() * n_vocab) {
            fail("stage on node {} returned {} logits for {} output tokens", stages_.back()->node(), logits.size(),
                 step.rows[j].size());
          }
          for (size_t r = 0; r < step.rows[j].size(); ++r) {
            std::copy_n(logits.data() + r * n_vocab, n_vocab, f.logits.data() + step.rows[j][r] * n_vocab);
          }
        }
      }
    } catch (const Error& e) {
      f.error = e.what();
    }
  }
  if (f.error.empty()) {
    for (const auto& [seq, len] : step.next) lengths_[static_cast<size_t>(seq)] = len;
    // The tokens of the step, for a replay (a replayed step writes the same tokens again).
    for (int64_t t = 0; t < step.batch.size(); ++t) {
      const auto tt = static_cast<size_t>(t);
      auto& h = history_[static_cast<size_t>(step.batch.seq[tt])];
      const auto pos = static_cast<size_t>(step.batch.pos[tt]);
      if (h.size() <= pos) h.resize(pos + 1, 0);
      h[pos] = step.batch.tokens.empty() ? 0 : step.batch.tokens[tt];
    }
    // The picks were drawn from copies of the samplers' states: move the originals on as if they had drawn them.
    for (Sampler* s : step.samplers) s->skip_sample();
  } else {
    // Some stages may have run part of the batch: roll every stage back so they agree again.
    for (const auto& [seq, len] : step.next) {
      for (auto& stage : stages_) {
        try {
          stage->truncate_sequence(seq, lengths_[static_cast<size_t>(seq)]);
        } catch (const Error&) {
          // A stage that failed may be gone; the caller replans and replays.
        }
      }
    }
    f.sampled.clear();
    f.logits.clear();
  }
  finished_.push_back(std::move(f));
}

PipelineExecutor::Finished PipelineExecutor::wait_for(uint64_t ticket) {
  for (;;) {
    for (auto it = finished_.begin(); it != finished_.end(); ++it) {
      if (it->ticket != ticket) continue;
      Finished f = std::move(*it);
      finished_.erase(it);
      return f;
    }
    pump();
  }
}

// Where each part's output tokens sit among the batch's: mixed batches are regrouped by sequence, so part order
// is not batch order. A (sequence, position) pair names a token uniquely.
std::vector<std::vector<size_t>> PipelineExecutor::output_rows(const Batch& batch, const std::vector<Batch>& parts) {
  std::map<std::pair<int32_t, int32_t>, size_t> row_of;
  size_t row = 0;
  for (int64_t t = 0; t < batch.size(); ++t) {
    const auto tt = static_cast<size_t>(t);
    if (batch.want_logits[tt]) row_of[{batch.seq[tt], batch.pos[tt]}] = row++;
  }
  std::vector<std::vector<size_t>> rows(parts.size());
  for (size_t j = 0; j < parts.size(); ++j) {
    for (int64_t t = 0; t < parts[j].size(); ++t) {
      const auto tt = static_cast<size_t>(t);
      if (parts[j].want_logits[tt]) rows[j].push_back(row_of.at({parts[j].seq[tt], parts[j].pos[tt]}));
    }
  }
  return rows;
}

void PipelineExecutor::decode(const Batch& batch, std::vector<float>& logits) {
  Finished f = wait_for(start(batch, {}, false, true));
  if (!f.error.empty()) fail("{}", f.error);
  logits = std::move(f.logits);
}

void PipelineExecutor::decode_sampled(const Batch& batch, std::span<const SampleRequest> requests,
                                      std::vector<SampledToken>& out) {
  Finished f = wait_for(start(batch, requests, true, true));
  if (!f.error.empty()) fail("{}", f.error);
  out = std::move(f.sampled);
}

uint64_t PipelineExecutor::submit_step(const Batch& batch, std::span<const SampleRequest> requests) {
  return start(batch, requests, true, false);
}

StepResult PipelineExecutor::collect_step() {
  if (finished_.empty() && steps_.empty()) fail("no step is in flight");
  while (finished_.empty()) pump();
  Finished f = std::move(finished_.front());
  finished_.pop_front();
  return StepResult{f.ticket, std::move(f.sampled), std::move(f.error)};
}

// A stage that failed is skipped: its replacement rebuilds from the history, which the edit changes too.
void PipelineExecutor::clear_sequence(int64_t seq) {
  if (in_flight_.at(static_cast<size_t>(seq))) fail("sequence {} cannot be cleared while a step uses it", seq);
  for (auto& s : stages_) {
    try {
      s->clear_sequence(seq);
    } catch (const Error&) {
      if (!factory_ || !s->failed()) throw;
    }
  }
  lengths_.at(static_cast<size_t>(seq)) = 0;
  history_[static_cast<size_t>(seq)].clear();
}

void PipelineExecutor::truncate_sequence(int64_t seq, int64_t n) {
  if (in_flight_.at(static_cast<size_t>(seq))) fail("sequence {} cannot be truncated while a step uses it", seq);
  if (n > lengths_.at(static_cast<size_t>(seq))) {
    fail("cannot truncate sequence {} to {} tokens: it holds {}", seq, n, lengths_.at(static_cast<size_t>(seq)));
  }
  for (auto& s : stages_) {
    try {
      s->truncate_sequence(seq, n);
    } catch (const Error&) {
      if (!factory_ || !s->failed()) throw;
    }
  }
  lengths_[static_cast<size_t>(seq)] = n;
  history_[static_cast<size_t>(seq)].resize(static_cast<size_t>(n));
}

}  // namespace tessera::cluster
