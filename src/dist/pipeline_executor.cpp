// PipelineExecutor: submits every micro-batch to the first stage at once (stages run jobs in order), and moves each
// completed micro-batch on to the next stage as soon as it arrives, so all stages stay busy.
#include "dist/pipeline_executor.h"

#include <algorithm>
#include <map>

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

std::vector<Batch> PipelineExecutor::split(const Batch& batch) const {
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

void PipelineExecutor::decode(const Batch& batch, std::vector<float>& logits) {
  if (stages_.empty()) fail("the pipeline has no stages");
  // Validate what every stage would check, before anything is sent, so a bad batch changes nothing anywhere.
  std::vector<int64_t> next = lengths_;
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

  const std::vector<Batch> parts = split(batch);
  std::vector<std::vector<float>> part_logits(parts.size());
  for (size_t j = 0; j < parts.size(); ++j) stages_[0]->submit({j, parts[j], {}});
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
      stages_[next_stage]->submit({d.id, parts[d.id], std::move(d.hidden)});
    } else {
      part_logits[d.id] = std::move(d.logits);
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

  // Reassemble the logits in the original batch order.
  const int64_t n_vocab = config_.n_vocab;
  logits.assign(static_cast<size_t>(batch.n_outputs() * n_vocab), 0.0f);
  std::map<std::pair<int32_t, int32_t>, size_t> row_of;  // (seq, pos) -> output row
  size_t row = 0;
  for (int64_t t = 0; t < batch.size(); ++t) {
    const auto tt = static_cast<size_t>(t);
    if (batch.want_logits[tt]) row_of[{batch.seq[tt], batch.pos[tt]}] = row++;
  }
  for (size_t j = 0; j < parts.size(); ++j) {
    size_t r = 0;
    for (int64_t t = 0; t < parts[j].size(); ++t) {
      const auto tt = static_cast<size_t>(t);
      if (!parts[j].want_logits[tt]) continue;
      const size_t dst = row_of.at({parts[j].seq[tt], parts[j].pos[tt]});
      std::copy_n(part_logits[j].data() + r * static_cast<size_t>(n_vocab), n_vocab,
                  logits.data() + dst * static_cast<size_t>(n_vocab));
      ++r;
    }
  }
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
