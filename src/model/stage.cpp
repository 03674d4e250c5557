// The forward pass, readable top to bottom: embed, then per layer attention and FFN with residuals, then the head.
// Gemma's extra steps (normalised sublayer outputs, GeGLU, sliding windows, per-layer inputs, K/V shared between
// layers, soft-capped logits) follow README_gemma.md section 4 of the test fixtures.
#include "model/stage.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>

#include "model/token_loop.h"
#include "tensor/kernels.h"
#include "tensor/quant.h"
#include "util/error.h"

namespace tessera {

namespace {

// A layer's first matmul of a step: q, k and v (stored in `store`), those the layer has.
NextWeights qkv_weights(const LayerWeights& w, std::array<const TensorView*, 3>& store) {
  size_t n = 0;
  for (const TensorView* v : {&w.wq, &w.wk, &w.wv}) {
    if (!v->empty()) store[n++] = v;
  }
  return NextWeights(store.data(), n);
}

KvCacheConfig cache_config(const ModelWeights& w, const StageOptions& o) {
  const ModelConfig& c = w.config();
  if (o.n_slots <= 0) fail("the number of parallel sequences must be positive, got {}", o.n_slots);
  if (o.n_ctx < 0) fail("the context size must be positive, got {}", o.n_ctx);
  // A rank keeps the KV heads of its share.
  auto shape = [&](int64_t il) { return w.layers().contains(il) ? w.layer(il).shape : c.layer(il); };
  return kv_cache_config(c, w.layers().begin, w.layers().end, o.n_slots, o.n_ctx > 0 ? o.n_ctx : c.n_ctx_train,
                         o.kv_type, o.window_batch, shape);
}

// Copies and packs the weights as the options ask (copy first, so the packing reads huge pages).
std::shared_ptr<const ModelWeights> prepare_weights(std::shared_ptr<const ModelWeights> w, const StageOptions& o,
                                                    ThreadPool& pool) {
  if (o.shard.sharded()) w = ModelWeights::sharded(w, o.shard, pool);
  if (o.copy_weights) w = ModelWeights::copied(w, Stage::packing_kernels(), pool);
  if (o.repack) w = ModelWeights::packed(w, Stage::packing_kernels(), pool);
  return w;
}

void add_bias(float* x, const std::vector<float>& bias, int64_t n_tokens) {
  if (bias.empty()) return;
  const auto n = static_cast<int64_t>(bias.size());
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int64_t i = 0; i < n; ++i) x[t * n + i] += bias[static_cast<size_t>(i)];
  }
}

// Rows [first, last) of a batch as a batch of its own.
Batch batch_part(const Batch& b, int64_t first, int64_t last) {
  Batch part;
  auto slice = [&](const auto& v) { return std::decay_t<decltype(v)>(v.begin() + first, v.begin() + last); };
  if (!b.tokens.empty()) part.tokens = slice(b.tokens);
  part.seq = slice(b.seq);
  part.pos = slice(b.pos);
  part.want_logits = slice(b.want_logits);
  return part;
}

}  // namespace

Stage::Stage(std::shared_ptr<const ModelWeights> weights, const StageOptions& options, ThreadPool& pool,
             collective::Communicator* comm)
    : weights_(prepare_weights(std::move(weights), options, pool)),
      pool_(pool),
      comm_(comm),
      vec_(VecOps::get(select_isa())),
      cache_(cache_config(*weights_, options)) {
  if (options.shard.sharded() &&
      (comm == nullptr || comm->size() != options.shard.n_ranks || comm->rank() != options.shard.rank)) {
    fail("a shard {} of {} needs a communicator of {} ranks in which it is rank {}", options.shard.rank,
         options.shard.n_ranks, options.shard.n_ranks, options.shard.rank);
  }
  if (arch_info(config().arch).ffn_act == FfnActivation::Gelu && !options.exact_gelu) {
    gelu_table_ = std::make_unique<GeluTable>();
  }
}

const Kernels& Stage::packing_kernels() { return Kernels::get(select_isa()); }

uint64_t Stage::packed_bytes_for(const ModelWeights& weights, const StageOptions& options) {
  return options.repack ? weights.packed_bytes_for(packing_kernels()) : 0;
}

void Stage::truncate_sequence(int64_t seq, int64_t n) {
  if (n > cache_.length(seq)) fail("cannot truncate sequence {} to {} tokens: it holds {}", seq, n, cache_.length(seq));
  if (!cache_.can_truncate(seq, n)) {
    fail("cannot truncate sequence {} to {} tokens: its sliding-window layers no longer hold the keys before it", seq,
         n);
  }
  cache_.set_length(seq, n);
}

bool Stage::has_rings() const {
  for (const KvLayer& l : cache_.config().layers) {
    if (l.is_ring(n_ctx())) return true;
  }
  return false;
}

void Stage::check_batch(const Batch& batch) const {
  const int64_t n = batch.size();
  if (n == 0) fail("empty batch");
  if (static_cast<int64_t>(batch.pos.size()) != n || static_cast<int64_t>(batch.want_logits.size()) != n ||
      (is_first() && static_cast<int64_t>(batch.tokens.size()) != n)) {
    fail("malformed batch: field lengths differ");
  }
  std::vector<int64_t> next(static_cast<size_t>(n_slots()));
  for (int64_t s = 0; s < n_slots(); ++s) next[static_cast<size_t>(s)] = cache_.length(s);
  for (int64_t t = 0; t < n; ++t) {
    const int64_t s = batch.seq[static_cast<size_t>(t)];
    const int64_t p = batch.pos[static_cast<size_t>(t)];
    if (s < 0 || s >= n_slots()) fail("token {} names sequence {}, but only {} are allowed", t, s, n_slots());
    if (p >= n_ctx()) fail("sequence {} reached the context limit of {} tokens (raise -c)", s, n_ctx());
    if (p != next[static_cast<size_t>(s)]) {
      fail("sequence {}: token at position {}, expected position {}", s, p, next[static_cast<size_t>(s)]);
    }
    ++next[static_cast<size_t>(s)];
    if (is_first()) {
      const int32_t tok = batch.tokens[static_cast<size_t>(t)];
      if (tok < 0 || tok >= config().n_vocab)
        fail("token id {} is outside the vocabulary of {}", tok, config().n_vocab);
    }
  }
}

void Stage::forward(const Batch& batch, const float* hidden_in, StageOutput& out) {
  check_batch(batch);
  if (!has_rings()) {
    forward_part(batch, hidden_in, out);
    return;
  }
  // A sliding layer's ring has room for window_batch new tokens of a sequence beside its window: longer runs go
  // through the stage in parts, each stored and attended before the next overwrites cells.
  const int64_t limit = cache_.config().window_batch;
  const int64_t width = in_width();
  StageOutput part_out;
  out.hidden.clear();
  out.logits.clear();
  std::vector<int64_t> count(static_cast<size_t>(n_slots()), 0);
  int64_t first = 0;
  for (int64_t t = 0; t <= batch.size(); ++t) {
    const bool full = t < batch.size() && ++count[static_cast<size_t>(batch.seq[static_cast<size_t>(t)])] > limit;
    if (t < batch.size() && !full) continue;
    const Batch part = batch_part(batch, first, t);
    forward_part(part, hidden_in != nullptr ? hidden_in + first * width : nullptr, part_out);
    out.hidden.insert(out.hidden.end(), part_out.hidden.begin(), part_out.hidden.end());
    out.logits.insert(out.logits.end(), part_out.logits.begin(), part_out.logits.end());
    std::fill(count.begin(), count.end(), 0);
    if (t < batch.size()) count[static_cast<size_t>(batch.seq[static_cast<size_t>(t)])] = 1;
    first = t;
  }
}

void Stage::forward_part(const Batch& batch, const float* hidden_in, StageOutput& out) {
  const ModelConfig& c = config();
  const int64_t n_tokens = batch.size();
  const int64_t n_embd = c.n_embd;
  x_.resize(static_cast<size_t>(n_tokens * n_embd));
  rope_sets_.clear();
  carried_.clear();
  for (int64_t src : c.kv_carried_across(layers().end)) carried_.emplace_back(src, std::vector<float>());

  if (is_first()) {
    embed(batch);
  } else {
    if (hidden_in == nullptr) fail("stage {}-{} needs input activations", layers().begin, layers().end - 1);
    read_boundary(batch, hidden_in);
  }

  for (int64_t l = layers().begin; l < layers().end; ++l) layer_forward(l, batch);

  for (int64_t t = 0; t < n_tokens; ++t) {
    const int64_t s = batch.seq[static_cast<size_t>(t)];
    cache_.set_length(s, std::max<int64_t>(cache_.length(s), batch.pos[static_cast<size_t>(t)] + 1));
  }

  if (!is_last()) {
    write_boundary(n_tokens, out.hidden);
    out.logits.clear();
    return;
  }
  // Only the tokens that want logits go through the output norm and the (large) head.
  const int64_t n_out = batch.n_outputs();
  norm_.resize(static_cast<size_t>(n_out * n_embd));
  int64_t row = 0;
  for (int64_t t = 0; t < n_tokens; ++t) {
    if (!batch.want_logits[static_cast<size_t>(t)]) continue;
    rms_norm(x_.data() + t * n_embd, weights_->output_norm().data(), n_embd, c.rms_eps, norm_.data() + row * n_embd);
    ++row;
  }
  out.hidden.clear();
  // A tensor-parallel rank holds a range of the vocabulary's rows.
  out.logits.resize(static_cast<size_t>(n_out * weights_->output().rows()));
  if (n_out > 0) {
    std::array<const TensorView*, 3> next;
    matmul(weights_->output(), norm_.data(), n_out, out.logits.data(), pool_, scratch_,
           qkv_weights(weights_->layer(layers().begin), next));
  }
  if (c.final_logit_softcap > 0.0f) {
    // A tanh per vocabulary entry is a visible share of a small model's decode step: spread over the threads.
    const float cap = c.final_logit_softcap;
    float* logits = out.logits.data();
    pool_.parallel_for(static_cast<int64_t>(out.logits.size()),
                       [&](int64_t i0, int64_t i1) { softcap(logits + i0, i1 - i0, cap); });
  }
  if (weights_->shard().sharded() && gather_) gather_logits(n_out, out.logits);
}

std::vector<BatchTime> Stage::time_batches(std::span<const int64_t> sizes, int rounds, double budget_s) {
  std::vector<BatchTime> out;
  const int64_t n_layers = layers().end - layers().begin;
  if (n_layers <= 0) return out;
  if (cache_.length(0) != 0) fail("timing the stage needs sequence 0 empty; it holds {} tokens", cache_.length(0));
  std::vector<int64_t> wanted(sizes.begin(), sizes.end());
  std::sort(wanted.begin(), wanted.end());
  wanted.erase(std::unique(wanted.begin(), wanted.end()), wanted.end());
  for (int64_t m : wanted) {
    if (m >= 1 && m <= n_ctx()) out.push_back({m, INFINITY});
  }
  const ModelConfig& c = config();
  const int64_t n_embd = c.n_embd;
  // The first layer with K/V of its own: a layer that reads another's needs that one's cache filled.
  int64_t timed = layers().begin;
  while (timed + 1 < layers().end && c.layer(timed).kv_source != timed) ++timed;
  const auto begin = std::chrono::steady_clock::now();
  for (int r = 0; r < std::max(1, rounds); ++r) {
    if (r > 0 && std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count() > budget_s) break;
    for (BatchTime& bt : out) {
      Batch batch;
      for (int64_t t = 0; t < bt.tokens; ++t) batch.add(0, 0, static_cast<int32_t>(t), false);
      // Hidden states of an ordinary size: the work does not depend on the values, but infinities would slow it.
      x_.resize(static_cast<size_t>(bt.tokens * n_embd));
      for (size_t i = 0; i < x_.size(); ++i) x_[i] = 0.01f * static_cast<float>(static_cast<int>(i % 97) - 48);
      const int64_t n_ple = c.arch == Arch::Gemma4 ? c.n_embd_per_layer * (c.n_layer - layers().begin) : 0;
      ple_base_ = layers().begin;
      ple_.assign(static_cast<size_t>(bt.tokens * n_ple), 0.01f);
      rope_sets_.clear();
      carried_.clear();
      const auto start = std::chrono::steady_clock::now();
      // A sliding layer's ring takes window_batch tokens at a time (forward splits longer runs the same way).
      const int64_t limit = has_rings() ? cache_.config().window_batch : bt.tokens;
      for (int64_t first = 0; first < bt.tokens; first += limit) {
        const int64_t last = std::min(bt.tokens, first + limit);
        const Batch part = last - first == bt.tokens ? batch : batch_part(batch, first, last);
        if (first > 0) {
          std::copy(x_.begin() + first * n_embd, x_.begin() + last * n_embd, x_.begin());
          rope_sets_.clear();
        }
        layer_forward(timed, part);
        cache_.set_length(0, last);
      }
      const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
      bt.seconds = std::min(bt.seconds, took.count());
      cache_.clear(0);
    }
  }
  for (BatchTime& bt : out) bt.seconds *= static_cast<double>(n_layers);
  return out;
}

const float* Stage::rope_for(const LayerShape& s, const Batch& batch) {
  for (const RopeSet& r : rope_sets_) {
    if (r.n_rot == s.n_rot && r.base == s.rope_base && r.freq_scale == s.rope_freq_scale && r.factors == s.rope_factors)
      return r.cs.data();
  }
  // Every layer of one configuration rotates by the same angles: their sines and cosines once per step.
  RopeSet r{s.n_rot, s.rope_base, s.rope_freq_scale, s.rope_factors, {}};
  const float* factors =
      s.rope_factors && !weights_->rope_factors().empty() ? weights_->rope_factors().data() : nullptr;
  r.cs.resize(static_cast<size_t>(batch.size() * s.n_rot));
  for (int64_t t = 0; t < batch.size(); ++t) {
    rope_angles(batch.pos[static_cast<size_t>(t)], s.n_rot, s.rope_base, s.rope_freq_scale, factors,
                r.cs.data() + t * s.n_rot);
  }
  rope_sets_.push_back(std::move(r));
  return rope_sets_.back().cs.data();
}

// q, k and v of the batch's tokens: projected, normalised, rotated, and k/v stored in the cache.
void Stage::attention_inputs(int64_t l, const LayerShape& s, const Batch& batch) {
  const ModelConfig& c = config();
  const LayerWeights& w = weights_->layer(l);
  const int64_t n_tokens = batch.size();
  const auto sz = [](int64_t n) { return static_cast<size_t>(n); };
  const bool own_kv = s.kv_source == l;
  const int64_t nq = s.n_embd_q();
  const int64_t nk = s.n_embd_k();
  const int64_t nv = s.n_embd_v();
  q_.resize(sz(n_tokens * nq));
  k_.resize(sz(n_tokens * nk));
  v_.resize(sz(n_tokens * nv));
  std::array<MatmulOut, 3> outs;
  size_t n_outs = 0;
  outs[n_outs++] = {&w.wq, q_.data()};
  if (own_kv) outs[n_outs++] = {&w.wk, k_.data()};
  if (own_kv && !w.wv.empty()) outs[n_outs++] = {&w.wv, v_.data()};
  const TensorView* wo[] = {&w.wo};
  matmul_multi(std::span<const MatmulOut>(outs.data(), n_outs), norm_.data(), n_tokens, pool_, scratch_, wo);
  add_bias(q_.data(), w.q_bias, n_tokens);
  add_bias(k_.data(), w.k_bias, n_tokens);
  add_bias(v_.data(), w.v_bias, n_tokens);

  const RopeMode mode = c.rope_style() == RopeStyle::Norm ? RopeMode::Norm : RopeMode::Neox;
  const float* cs_all = rope_for(s, batch);
  const bool gemma4 = c.arch == Arch::Gemma4;
  const int64_t entry = own_kv ? cache_.config().index_of(l) : -1;
  // Each token stores its own cache position: the tokens' stores do not overlap.
  for_each_token(pool_, n_tokens, [&](int64_t t) {
    float* qt = q_.data() + t * nq;
    float* kt = k_.data() + t * nk;
    float* vt = v_.data() + t * nv;
    const float* cs = cs_all + t * s.n_rot;
    if (!w.q_norm.empty()) {
      for (int64_t h = 0; h < s.n_head; ++h)
        rms_norm(qt + h * s.head_dim, w.q_norm.data(), s.head_dim, c.rms_eps, qt + h * s.head_dim);
    }
    rope_rotate(qt, s.n_head, s.head_dim, s.n_rot, cs, mode);
    if (!own_kv) return;
    if (gemma4) {
      // V is RMS-normalised without a weight; without attn_v it is the raw K (before k's norm and rotation).
      if (w.wv.empty()) std::copy_n(kt, nk, vt);
      for (int64_t h = 0; h < s.n_head_kv; ++h)
        rms_norm(vt + h * s.head_dim_v, nullptr, s.head_dim_v, c.rms_eps, vt + h * s.head_dim_v);
    }
    if (!w.k_norm.empty()) {
      for (int64_t h = 0; h < s.n_head_kv; ++h)
        rms_norm(kt + h * s.head_dim, w.k_norm.data(), s.head_dim, c.rms_eps, kt + h * s.head_dim);
    }
    rope_rotate(kt, s.n_head_kv, s.head_dim, s.n_rot, cs, mode);
    cache_.store(entry, batch.seq[sz(t)], batch.pos[sz(t)], kt, vt, vec_);
  });
  // A later stage reuses this layer's K/V (Gemma 4): its rows travel with the hidden state.
  for (auto& [src, rows] : carried_) {
    if (src != l) continue;
    rows.resize(sz(n_tokens * (nk + nv)));
    for (int64_t t = 0; t < n_tokens; ++t) {
      std::copy_n(k_.data() + t * nk, nk, rows.data() + t * (nk + nv));
      std::copy_n(v_.data() + t * nv, nv, rows.data() + t * (nk + nv) + nk);
    }
  }
}

void Stage::layer_forward(int64_t l, const Batch& batch) {
  const ModelConfig& c = config();
  const LayerWeights& w = weights_->layer(l);
  const LayerShape& s = w.shape;  // this rank's share under tensor parallelism
  const bool tp = weights_->shard().sharded() && weights_->shard().tp;
  const int64_t n_tokens = batch.size();
  const int64_t n_embd = c.n_embd;
  const auto sz = [](int64_t n) { return static_cast<size_t>(n); };
  const bool gemma = arch_info(c.arch).gemma;

  // Attention block.
  norm_.resize(sz(n_tokens * n_embd));
  for_each_token(pool_, n_tokens, [&](int64_t t) {
    rms_norm(x_.data() + t * n_embd, w.attn_norm.data(), n_embd, c.rms_eps, norm_.data() + t * n_embd);
  });
  attention_inputs(l, s, batch);
  attn_.resize(sz(n_tokens * s.n_head * s.head_dim_v));
  const LayerShape whole = c.layer(l);
  const AttentionShape shape{
      s.n_head,  s.n_head_kv, s.head_dim, s.head_dim_v, c.attention_scale(s), s.window, whole.n_head / whole.n_head_kv,
      w.q_head0, w.kv_head0};
  attention(shape, cache_, cache_.config().index_of(s.kv_source), batch, q_.data(), attn_.data(), pool_, vec_,
            attention_scratch_);
  proj_.resize(sz(n_tokens * n_embd));
  const TensorView* ffn_first[] = {s.moe && !gemma ? &w.ffn_gate_inp : &w.ffn_gate, &w.ffn_up};
  matmul(w.wo, attn_.data(), n_tokens, proj_.data(), pool_, scratch_,
         NextWeights{ffn_first}.first(s.moe && !gemma ? 1 : 2));
  if (w.attn_split) reduce(proj_, n_tokens * n_embd);
  if (gemma) norm_rows(proj_.data(), w.post_attn_norm, n_tokens, n_embd);
  add_residual(n_tokens, n_embd);

  // Feed-forward block.
  for_each_token(pool_, n_tokens, [&](int64_t t) {
    rms_norm(x_.data() + t * n_embd, w.ffn_norm.data(), n_embd, c.rms_eps, norm_.data() + t * n_embd);
  });
  // The next layer's q/k/v, or the output head after the last layer (this stage's first layer comes next on a
  // stage without the head).
  std::array<const TensorView*, 3> next;
  const TensorView* head[] = {&weights_->output()};
  const NextWeights after = l + 1 < layers().end ? qkv_weights(weights_->layer(l + 1), next)
                            : is_last()          ? NextWeights{head}
                                                 : qkv_weights(weights_->layer(layers().begin), next);
  if (gemma) {
    gemma_ffn(l, s, n_tokens, after);
  } else if (s.moe) {
    if (s.n_ff_exp > 0) {
      ffn_.moe(w, c, {}, norm_.data(), nullptr, n_tokens, proj_.data(), pool_, after);
    } else {
      std::fill_n(proj_.data(), n_tokens * n_embd, 0.0f);  // a rank that holds none of the experts' rows
    }
    if (weights_->shard().sharded()) reduce(proj_, n_tokens * n_embd);
    add_residual(n_tokens, n_embd);
  } else {
    dense_ffn(w, s.n_ff, {}, n_tokens, proj_, after);
    if (tp) reduce(proj_, n_tokens * n_embd);
    add_residual(n_tokens, n_embd);
  }
}

// Gemma's FFN block on norm_ = rmsnorm(x, ffn_norm), then Gemma 4's per-layer input and output scale.
void Stage::gemma_ffn(int64_t l, const LayerShape& s, int64_t n_tokens, NextWeights after) {
  const ModelConfig& c = config();
  const LayerWeights& w = weights_->layer(l);
  const int64_t n_embd = c.n_embd;
  const auto sz = [](int64_t n) { return static_cast<size_t>(n); };
  const GatedActivation act{FfnActivation::Gelu, gelu_table_.get()};
  const bool tp = weights_->shard().sharded() && weights_->shard().tp;
  if (!s.moe) {
    dense_ffn(w, s.n_ff, act, n_tokens, proj_, after);
    if (tp) reduce(proj_, n_tokens * n_embd);
  } else {
    // Gemma 4 MoE: a dense MLP beside the experts, each normalised, their sum normalised again. The router reads
    // the stream RMS-normalised without a weight, times 1/sqrt(n_embd) and its own scale.
    mlp_.resize(sz(n_tokens * n_embd));
    router_in_.resize(sz(n_tokens * n_embd));
    experts_in_.resize(sz(n_tokens * n_embd));
    const float inv = 1.0f / std::sqrt(static_cast<float>(n_embd));
    for_each_token(pool_, n_tokens, [&](int64_t t) {
      float* r = router_in_.data() + t * n_embd;
      rms_norm(x_.data() + t * n_embd, nullptr, n_embd, c.rms_eps, r);
      for (int64_t i = 0; i < n_embd; ++i) r[i] = r[i] * inv * w.ffn_gate_inp_scale[sz(i)];
      rms_norm(x_.data() + t * n_embd, w.pre_ffn_norm_2.data(), n_embd, c.rms_eps, experts_in_.data() + t * n_embd);
    });
    if (s.n_ff_exp > 0 && s.n_ff > 0) {
      // The dense MLP (on norm_) runs in the experts' passes of the pool.
      const DenseBeside dense{norm_.data(), s.n_ff, mlp_.data()};
      ffn_.moe(w, c, act, experts_in_.data(), router_in_.data(), n_tokens, proj_.data(), pool_, after, &dense);
    } else {
      dense_ffn(w, s.n_ff, act, n_tokens, mlp_, {});
      if (s.n_ff_exp > 0) {
        ffn_.moe(w, c, act, experts_in_.data(), router_in_.data(), n_tokens, proj_.data(), pool_, after);
      } else {
        std::fill_n(proj_.data(), n_tokens * n_embd, 0.0f);  // a rank that holds none of the experts' rows
      }
    }
    if (tp) reduce(mlp_, n_tokens * n_embd);
    norm_rows(mlp_.data(), w.post_ffn_norm_1, n_tokens, n_embd);
    if (weights_->shard().sharded()) reduce(proj_, n_tokens * n_embd);
    norm_rows(proj_.data(), w.post_ffn_norm_2, n_tokens, n_embd);
    for (size_t i = 0; i < sz(n_tokens * n_embd); ++i) proj_[i] += mlp_[i];
  }
  norm_rows(proj_.data(), w.post_ffn_norm, n_tokens, n_embd);
  add_residual(n_tokens, n_embd);
  if (c.arch != Arch::Gemma4) return;

  if (c.n_embd_per_layer > 0) {
    // The layer's per-layer input, gated by the stream: x += rmsnorm(proj (gelu(inp_gate x) * ple[l])).
    const int64_t n_pl = c.n_embd_per_layer;
    const int64_t ple_width = n_pl * (c.n_layer - ple_base_);
    gate_pl_.resize(sz(n_tokens * n_pl));
    ple_in_.resize(sz(n_tokens * n_pl));
    matmul(w.ple_gate, x_.data(), n_tokens, gate_pl_.data(), pool_, scratch_);
    for (int64_t t = 0; t < n_tokens; ++t) {
      const float* ple = ple_.data() + t * ple_width + (l - ple_base_) * n_pl;
      geglu(gate_pl_.data() + t * n_pl, ple, n_pl, ple_in_.data() + t * n_pl, gelu_table_.get());
    }
    matmul(w.ple_proj, ple_in_.data(), n_tokens, proj_.data(), pool_, scratch_, after);
    norm_rows(proj_.data(), w.ple_norm, n_tokens, n_embd);
    add_residual(n_tokens, n_embd);
  }
  for (float& v : x_) v *= w.layer_out_scale;
}

// FFN of norm_ into out; a tensor-parallel rank that holds none of its rows adds nothing.
void Stage::dense_ffn(const LayerWeights& w, int64_t n_ff, GatedActivation act, int64_t n_tokens,
                      std::vector<float>& out, NextWeights after) {
  if (n_ff == 0) {
    std::fill_n(out.data(), n_tokens * config().n_embd, 0.0f);
    return;
  }
  ffn_.dense(w, n_ff, act, norm_.data(), n_tokens, out.data(), pool_, after);
}

void Stage::norm_rows(float* rows, const std::vector<float>& w, int64_t n_tokens, int64_t n) {
  const float eps = config().rms_eps;
  for_each_token(pool_, n_tokens, [&](int64_t t) { rms_norm(rows + t * n, w.data(), n, eps, rows + t * n); });
}

void Stage::add_residual(int64_t n_tokens, int64_t n_embd) {
  for_each_token(pool_, n_tokens, [&](int64_t t) {
    float* x = x_.data() + t * n_embd;
    const float* p = proj_.data() + t * n_embd;
    for (int64_t i = 0; i < n_embd; ++i) x[i] += p[i];
  });
}

}  // namespace tessera
