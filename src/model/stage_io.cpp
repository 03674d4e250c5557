// What enters and leaves a Stage besides its layers' work: the embedding (and Gemma 4's per-layer inputs) on the
// first stage, the boundary rows between stages (hidden state, per-layer inputs, reused K/V), and under tensor
// parallelism the all-reduce of partial outputs and the gather of the head's vocabulary shares.
#include <algorithm>
#include <cmath>

#include "model/stage.h"
#include "model/token_loop.h"
#include "tensor/quant.h"
#include "util/error.h"

namespace tessera {

void Stage::forward_ungathered(const Batch& batch, const float* hidden_in, StageOutput& out) {
  gather_ = false;
  try {
    forward(batch, hidden_in, out);
  } catch (...) {
    gather_ = true;
    throw;
  }
  gather_ = true;
}

void Stage::reduce(std::vector<float>& v, int64_t n) {
  if (comm_ != nullptr && comm_->size() > 1) comm_->all_reduce_sum(std::span<float>(v.data(), static_cast<size_t>(n)));
}

// The ranks' vocabulary ranges, in rank order, into whole rows on rank 0 (the others keep none).
void Stage::gather_logits(int64_t n_out, std::vector<float>& logits) {
  comm_->gather(logits, gathered_, 0);
  if (comm_->rank() != 0) {
    logits.clear();
    return;
  }
  const int64_t n_vocab = config().n_vocab;
  logits.assign(static_cast<size_t>(n_out * n_vocab), 0.0f);
  int64_t v0 = 0;
  size_t at = 0;
  ShardSpec spec = weights_->shard();
  for (int r = 0; r < spec.n_ranks; ++r) {
    spec.rank = r;
    const auto [b, e] = share_range(n_vocab, spec, "the vocabulary");
    for (int64_t t = 0; t < n_out; ++t) {
      std::copy_n(gathered_.data() + at + static_cast<size_t>(t * (e - b)), e - b, logits.data() + t * n_vocab + b);
    }
    at += static_cast<size_t>(n_out * (e - b));
    v0 = e;
  }
  if (v0 != n_vocab || at != gathered_.size()) fail("the ranks' logits cover {} of {} columns", v0, n_vocab);
}

void Stage::embed(const Batch& batch) {
  const ModelConfig& c = config();
  const int64_t n_embd = c.n_embd;
  const TensorView& embd = weights_->token_embd();
  const float scale = arch_info(c.arch).gemma ? std::sqrt(static_cast<float>(n_embd)) : 1.0f;
  for (int64_t t = 0; t < batch.size(); ++t) {
    float* x = x_.data() + t * n_embd;
    dequantize_row(embd.type, embd.row(batch.tokens[static_cast<size_t>(t)]), x, n_embd);
    if (scale != 1.0f) {
      for (int64_t i = 0; i < n_embd; ++i) x[i] *= scale;
    }
  }
  if (c.arch == Arch::Gemma4 && c.n_embd_per_layer > 0) per_layer_inputs(batch);
}

void Stage::per_layer_inputs(const Batch& batch) {
  const ModelConfig& c = config();
  const int64_t n_tokens = batch.size();
  const int64_t n_pl = c.n_embd_per_layer;
  const int64_t width = n_pl * c.n_layer;
  ple_base_ = 0;
  ple_.resize(static_cast<size_t>(n_tokens * width));
  proj_.resize(static_cast<size_t>(n_tokens * width));
  matmul(weights_->per_layer_proj(), x_.data(), n_tokens, proj_.data(), pool_, scratch_);
  const TensorView& tok = weights_->per_layer_tok_embd();
  const float tok_scale = std::sqrt(static_cast<float>(n_pl));
  const float proj_scale = 1.0f / std::sqrt(static_cast<float>(c.n_embd));
  const float mix = 1.0f / std::sqrt(2.0f);
  const float* norm = weights_->per_layer_proj_norm().data();
  for_each_token(pool_, n_tokens, [&](int64_t t) {
    float* out = ple_.data() + t * width;
    float* pr = proj_.data() + t * width;
    dequantize_row(tok.type, tok.row(batch.tokens[static_cast<size_t>(t)]), out, width);
    for (int64_t i = 0; i < width; ++i) pr[i] *= proj_scale;
    for (int64_t l = 0; l < c.n_layer; ++l) rms_norm(pr + l * n_pl, norm, n_pl, c.rms_eps, pr + l * n_pl);
    for (int64_t i = 0; i < width; ++i) out[i] = (pr[i] + out[i] * tok_scale) * mix;
  });
}

void Stage::read_boundary(const Batch& batch, const float* hidden_in) {
  const ModelConfig& c = config();
  const int64_t n_tokens = batch.size();
  const int64_t n_embd = c.n_embd;
  const int64_t width = in_width();
  const int64_t begin = layers().begin;
  const int64_t n_ple = c.arch == Arch::Gemma4 ? c.n_embd_per_layer * (c.n_layer - begin) : 0;
  ple_base_ = begin;
  ple_.resize(static_cast<size_t>(n_tokens * n_ple));
  for (int64_t t = 0; t < n_tokens; ++t) {
    const float* row = hidden_in + t * width;
    std::copy_n(row, n_embd, x_.data() + t * n_embd);
    std::copy_n(row + n_embd, n_ple, ple_.data() + t * n_ple);
  }
  // The K/V rows of earlier stages' layers that this stage's layers (or later ones) read: into this stage's copy of
  // that layer's cache, and on to the next stage.
  int64_t offset = n_embd + n_ple;
  for (int64_t src : c.kv_carried_across(begin)) {
    const LayerShape s = c.layer(src);
    const int64_t nk = s.n_embd_k();
    const int64_t nv = s.n_embd_v();
    const int64_t entry = cache_.config().index_of(src);
    auto carried = std::find_if(carried_.begin(), carried_.end(), [&](const auto& e) { return e.first == src; });
    if (carried != carried_.end()) carried->second.resize(static_cast<size_t>(n_tokens * (nk + nv)));
    for (int64_t t = 0; t < n_tokens; ++t) {
      const float* kv = hidden_in + t * width + offset;
      if (entry >= 0) {
        cache_.store(entry, batch.seq[static_cast<size_t>(t)], batch.pos[static_cast<size_t>(t)], kv, kv + nk, vec_);
      }
      if (carried != carried_.end()) std::copy_n(kv, nk + nv, carried->second.data() + t * (nk + nv));
    }
    offset += nk + nv;
  }
}

void Stage::write_boundary(int64_t n_tokens, std::vector<float>& out) const {
  const ModelConfig& c = config();
  const int64_t n_embd = c.n_embd;
  const int64_t width = out_width();
  const int64_t end = layers().end;
  const int64_t n_ple = c.arch == Arch::Gemma4 ? c.n_embd_per_layer * (c.n_layer - end) : 0;
  const int64_t ple_width = c.arch == Arch::Gemma4 ? c.n_embd_per_layer * (c.n_layer - ple_base_) : 0;
  const int64_t ple_skip = c.arch == Arch::Gemma4 ? c.n_embd_per_layer * (end - ple_base_) : 0;
  out.resize(static_cast<size_t>(n_tokens * width));
  for (int64_t t = 0; t < n_tokens; ++t) {
    float* row = out.data() + t * width;
    std::copy_n(x_.data() + t * n_embd, n_embd, row);
    std::copy_n(ple_.data() + t * ple_width + ple_skip, n_ple, row + n_embd);
    int64_t offset = n_embd + n_ple;
    for (const auto& [src, rows] : carried_) {
      const int64_t n = c.layer(src).n_embd_k() + c.layer(src).n_embd_v();
      std::copy_n(rows.data() + t * n, n, row + offset);
      offset += n;
    }
  }
}

}  // namespace tessera
