// PipelineExecutor: submits every micro-batch to the first stage at once (stages run jobs in order), and moves each
// completed micro-batch on to the next stage as soon as it arrives, so all stages stay busy.
#include "dist/pipeline_executor.h"

#include <algorithm>
#include <map>

#include "dist/messages.h"
#include "util/error.h"

namespace tessera {

PipelineExecutor::PipelineExecutor(ModelConfig config, int64_t n_ctx, int64_t n_slots, PipelineOptions options)
    : config_(std::move(config)),
      n_ctx_(n_ctx),
      n_slots_(n_slots),
      options_(options),
      lengths_(static_cast<size_t>(n_slots), 0) {}

void PipelineExecutor::add_stage(std::unique_ptr<StageEndpoint> stage) { stages_.push_back(std::move(stage)); }

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
  const size_t budget = dist::kMaxChunkBytes / 2;
  const auto max_tokens = static_cast<int64_t>(
      std::min<size_t>(dist::kMaxBatchTokens, budget / (sizeof(float) * static_cast<size_t>(config_.n_embd))));
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

std::vector<Batch> PipelineExecutor::split(const Batch& batch) const { return cap(split_parts(batch)); }

std::vector<Batch> PipelineExecutor::split_parts(const Batch& batch) const {
  const int64_t n = batch.size();
  const auto stages = static_cast<int64_t>(std::max<size_t>(1, stages_.size()));
  std::vector<Batch> out;
  if (stages == 1 || n == 1) {
    out.push_back(batch);
    return out;
  }
  std::map<int32_t, int64_t> per_seq;
  for (int32_t s : batch.seq) ++per_seq[s];
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
  // One sequence: chunks in order. Enough chunks to fill the pipeline, but not so small that matmuls lose efficiency.
  const int64_t m = options_.micro_batch > 0 ? options_.micro_batch : std::max<int64_t>(16, (n + 4 * stages - 1) / (4 * stages));
  for (int64_t start = 0; start < n; start += m) {
    Batch b;
    for (int64_t t = start; t < std::min(n, start + m); ++t) {
      const auto tt = static_cast<size_t>(t);
      b.add(batch.tokens.empty() ? 0 : batch.tokens[tt], batch.seq[tt], batch.pos[tt], batch.want_logits[tt]);
    }
    out.push_back(std::move(b));
  }
  return out;
}

void PipelineExecutor::check_batch(const Batch& batch, std::vector<int64_t>& next) const {
  if (stages_.empty()) fail("the pipeline has no stages");
  // Validate what every stage would check, before anything is sent, so a bad batch changes nothing anywhere.
  next = lengths_;
  for (int64_t t = 0; t < batch.size(); ++t) {
    const int32_t s = batch.seq[static_cast<size_t>(t)];
    const int32_t p = batch.pos[static_cast<size_t>(t)];
    if (s < 0 || s >= n_slots_) fail("token {} names sequence {}, but only {} are allowed", t, s, n_slots_);
    if (p >= n_ctx_) fail("sequence {} reached the context limit of {} tokens (raise -c)", s, n_ctx_);
    if (p != next[static_cast<size_t>(s)]) {
      fail("sequence {}: token at position {}, expected position {}", s, p, next[static_cast<size_t>(s)]);
    }
    ++next[static_cast<size_t>(s)];
  }
}

std::vector<StageDone> PipelineExecutor::run(const std::vector<Batch>& parts,
                                             std::vector<std::vector<StageSample>> sampling,
                                             const Batch& batch, const std::vector<int64_t>& next) {
  std::vector<StageDone> results(parts.size());
  const size_t last = stages_.size() - 1;
  for (size_t j = 0; j < parts.size(); ++j) {
    StageJob job{j, parts[j], {}, {}};
    if (last == 0) job.sampling = std::move(sampling[j]);
    stages_[0]->submit(std::move(job));
  }
  std::string error;
  size_t outstanding = parts.size();
  while (outstanding > 0) {
    StageDone d = done_.pop();
    if (!d.error.empty()) {
      if (error.empty()) error = d.error;
      --outstanding;
      continue;
    }
    const auto next_stage = static_cast<size_t>(d.stage) + 1;
    if (next_stage < stages_.size() && error.empty()) {
      StageJob job{d.id, parts[d.id], std::move(d.hidden), {}};
      if (next_stage == last) job.sampling = std::move(sampling[d.id]);
      stages_[next_stage]->submit(std::move(job));
    } else {
      const size_t id = d.id;
      results[id] = std::move(d);
      --outstanding;
    }
  }
  if (!error.empty()) {
    // Some stages may have run part of the batch: roll every stage back so they agree again.
    for (int64_t t = 0; t < batch.size(); ++t) {
      const int32_t s = batch.seq[static_cast<size_t>(t)];
      for (auto& stage : stages_) {
        try {
          stage->truncate_sequence(s, lengths_[static_cast<size_t>(s)]);
        } catch (const Error&) {
          // A stage that failed may be gone; the caller replans and replays.
        }
      }
    }
    fail("{}", error);
  }
  lengths_ = next;
  return results;
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
  std::vector<int64_t> next;
  check_batch(batch, next);
  const std::vector<Batch> parts = split(batch);
  const auto rows = output_rows(batch, parts);
  std::vector<StageDone> results = run(parts, std::vector<std::vector<StageSample>>(parts.size()), batch, next);

  const auto n_vocab = static_cast<size_t>(config_.n_vocab);
  logits.resize(static_cast<size_t>(batch.n_outputs()) * n_vocab);
  for (size_t j = 0; j < parts.size(); ++j) {
    if (results[j].logits.size() != rows[j].size() * n_vocab) {
      fail("stage on node {} returned {} logits for {} output tokens", stages_.back()->node(),
           results[j].logits.size(), rows[j].size());
    }
    for (size_t r = 0; r < rows[j].size(); ++r) {
      std::copy_n(results[j].logits.data() + r * n_vocab, n_vocab, logits.data() + rows[j][r] * n_vocab);
    }
  }
}

void PipelineExecutor::decode_sampled(const Batch& batch, std::span<const SampleRequest> requests,
                                      std::vector<SampledToken>& out) {
  std::vector<int64_t> next;
  check_batch(batch, next);
  if (requests.size() != static_cast<size_t>(batch.n_outputs())) {
    fail("{} sampling requests for a batch with {} output tokens", requests.size(), batch.n_outputs());
  }
  const std::vector<Batch> parts = split(batch);
  const auto rows = output_rows(batch, parts);
  // The last stage samples from each sampler's state; a request goes with the part holding its output token.
  std::vector<std::vector<StageSample>> sampling(parts.size());
  for (size_t j = 0; j < parts.size(); ++j) {
    std::map<int32_t, int> outputs;
    size_t r = 0;
    for (int64_t t = 0; t < parts[j].size(); ++t) {
      const auto tt = static_cast<size_t>(t);
      if (!parts[j].want_logits[tt]) continue;
      const int32_t seq = parts[j].seq[tt];
      if (++outputs[seq] > 1) fail("sequence {} has several output tokens in one batch; sampling takes one", seq);
      const SampleRequest& req = requests[rows[j][r++]];
      sampling[j].push_back({seq, req.sampler->state(), req.top_logprobs});
    }
  }
  std::vector<StageDone> results = run(parts, std::move(sampling), batch, next);
  out.assign(requests.size(), SampledToken{});
  for (size_t j = 0; j < parts.size(); ++j) {
    if (results[j].sampled.size() != rows[j].size()) {
      fail("stage on node {} returned {} sampled tokens for {} requests", stages_.back()->node(),
           results[j].sampled.size(), rows[j].size());
    }
    for (size_t r = 0; r < rows[j].size(); ++r) out[rows[j][r]] = std::move(results[j].sampled[r]);
  }
  // The picks were drawn from copies of the samplers' states: move the originals on as if they had drawn them.
  for (const SampleRequest& r : requests) r.sampler->skip_sample();
}

void PipelineExecutor::clear_sequence(int64_t seq) {
  for (auto& s : stages_) s->clear_sequence(seq);
  lengths_.at(static_cast<size_t>(seq)) = 0;
}

void PipelineExecutor::truncate_sequence(int64_t seq, int64_t n) {
  if (n > lengths_.at(static_cast<size_t>(seq))) {
    fail("cannot truncate sequence {} to {} tokens: it holds {}", seq, n, lengths_.at(static_cast<size_t>(seq)));
  }
  for (auto& s : stages_) s->truncate_sequence(seq, n);
  lengths_[static_cast<size_t>(seq)] = n;
}

}  // namespace tessera
