// The forward pass, readable top to bottom: embed, then per layer attention and FFN with residuals, then the head.
#include "model/stage.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>

#include "model/token_loop.h"
#include "tensor/kernels.h"
#include "tensor/quant.h"
#include "tensor/tensor_ops.h"
#include "util/error.h"

namespace tessera {

namespace {

// A layer's first matmul of a step: q, k and v (stored in `store`).
NextWeights qkv_weights(const LayerWeights& w, std::array<const TensorView*, 3>& store) {
  store = {&w.wq, &w.wk, &w.wv};
  return store;
}

KvCacheConfig cache_config(const ModelWeights& w, const StageOptions& o) {
  const ModelConfig& c = w.config();
  if (o.n_slots <= 0) fail("the number of parallel sequences must be positive, got {}", o.n_slots);
  if (o.n_ctx < 0) fail("the context size must be positive, got {}", o.n_ctx);
  KvCacheConfig kv;
  kv.n_layers = w.layers().size();
  kv.n_slots = o.n_slots;
  kv.n_ctx = o.n_ctx > 0 ? o.n_ctx : c.n_ctx_train;
  kv.n_embd_k = c.n_embd_k();
  kv.n_embd_v = c.n_embd_v();
  kv.type = o.kv_type;
  kv.n_head_kv = c.n_head_kv;
  return kv;
}

// Copies and packs the weights as the options ask (copy first, so the packing reads huge pages).
std::shared_ptr<const ModelWeights> prepare_weights(std::shared_ptr<const ModelWeights> w, const StageOptions& o,
                                                    ThreadPool& pool) {
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

}  // namespace

Stage::Stage(std::shared_ptr<const ModelWeights> weights, const StageOptions& options, ThreadPool& pool)
    : weights_(prepare_weights(std::move(weights), options, pool)),
      pool_(pool),
      vec_(VecOps::get(select_isa())),
      cache_(cache_config(*weights_, options)) {}

const Kernels& Stage::packing_kernels() { return Kernels::get(select_isa()); }

uint64_t Stage::packed_bytes_for(const ModelWeights& weights, const StageOptions& options) {
  return options.repack ? weights.packed_bytes_for(packing_kernels()) : 0;
}

void Stage::truncate_sequence(int64_t seq, int64_t n) {
  if (n > cache_.length(seq)) fail("cannot truncate sequence {} to {} tokens: it holds {}", seq, n, cache_.length(seq));
  cache_.set_length(seq, n);
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
  const ModelConfig& c = config();
  const int64_t n_tokens = batch.size();
  const int64_t n_embd = c.n_embd;
  x_.resize(static_cast<size_t>(n_tokens * n_embd));

  if (is_first()) {
    const TensorView& embd = weights_->token_embd();
    for (int64_t t = 0; t < n_tokens; ++t) {
      dequantize_row(embd.type, embd.row(batch.tokens[static_cast<size_t>(t)]), x_.data() + t * n_embd, n_embd);
    }
  } else {
    if (hidden_in == nullptr) fail("stage {}-{} needs input activations", layers().begin, layers().end - 1);
    std::copy_n(hidden_in, n_tokens * n_embd, x_.data());
  }

  for (int64_t l = layers().begin; l < layers().end; ++l) layer_forward(l, batch);

  for (int64_t t = 0; t < n_tokens; ++t) {
    const int64_t s = batch.seq[static_cast<size_t>(t)];
    cache_.set_length(s, std::max<int64_t>(cache_.length(s), batch.pos[static_cast<size_t>(t)] + 1));
  }

  if (!is_last()) {
    out.hidden.assign(x_.begin(), x_.end());
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
  out.logits.resize(static_cast<size_t>(n_out * c.n_vocab));
  if (n_out > 0) {
    std::array<const TensorView*, 3> next;
    matmul(weights_->output(), norm_.data(), n_out, out.logits.data(), pool_, scratch_,
           qkv_weights(weights_->layer(layers().begin), next));
  }
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
  const int64_t n_embd = config().n_embd;
  const auto begin = std::chrono::steady_clock::now();
  for (int r = 0; r < std::max(1, rounds); ++r) {
    if (r > 0 && std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count() > budget_s) break;
    for (BatchTime& bt : out) {
      Batch batch;
      for (int64_t t = 0; t < bt.tokens; ++t) batch.add(0, 0, static_cast<int32_t>(t), false);
      // Hidden states of an ordinary size: the work does not depend on the values, but infinities would slow it.
      x_.resize(static_cast<size_t>(bt.tokens * n_embd));
      for (size_t i = 0; i < x_.size(); ++i) x_[i] = 0.01f * static_cast<float>(static_cast<int>(i % 97) - 48);
      const auto start = std::chrono::steady_clock::now();
      layer_forward(layers().begin, batch);
      const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
      bt.seconds = std::min(bt.seconds, took.count());
      cache_.clear(0);
    }
  }
  for (BatchTime& bt : out) bt.seconds *= static_cast<double>(n_layers);
  return out;
}

void Stage::layer_forward(int64_t l, const Batch& batch) {
  const ModelConfig& c = config();
  const LayerWeights& w = weights_->layer(l);
  const int64_t local = l - layers().begin;
  const int64_t n_tokens = batch.size();
  const int64_t n_embd = c.n_embd;
  const auto sz = [](int64_t n) { return static_cast<size_t>(n); };

  // Attention block.
  norm_.resize(sz(n_tokens * n_embd));
  for_each_token(pool_, n_tokens, [&](int64_t t) {
    rms_norm(x_.data() + t * n_embd, w.attn_norm.data(), n_embd, c.rms_eps, norm_.data() + t * n_embd);
  });
  q_.resize(sz(n_tokens * c.n_embd_q()));
  k_.resize(sz(n_tokens * c.n_embd_k()));
  v_.resize(sz(n_tokens * c.n_embd_v()));
  const MatmulOut qkv[] = {{&w.wq, q_.data()}, {&w.wk, k_.data()}, {&w.wv, v_.data()}};
  const TensorView* wo[] = {&w.wo};
  matmul_multi(qkv, norm_.data(), n_tokens, pool_, scratch_, wo);
  add_bias(q_.data(), w.q_bias, n_tokens);
  add_bias(k_.data(), w.k_bias, n_tokens);
  add_bias(v_.data(), w.v_bias, n_tokens);

  const RopeMode mode = c.rope_style() == RopeStyle::Norm ? RopeMode::Norm : RopeMode::Neox;
  if (local == 0) {
    // Every layer rotates by the same angles: their sines and cosines once per step, not per layer.
    const float* factors = weights_->rope_factors().empty() ? nullptr : weights_->rope_factors().data();
    rope_cs_.resize(sz(n_tokens * c.n_rot));
    for (int64_t t = 0; t < n_tokens; ++t) {
      rope_angles(batch.pos[sz(t)], c.n_rot, c.rope_freq_base, c.rope_freq_scale, factors,
                  rope_cs_.data() + t * c.n_rot);
    }
  }
  // Each token stores its own cache position: the tokens' stores do not overlap.
  for_each_token(pool_, n_tokens, [&](int64_t t) {
    float* qt = q_.data() + t * c.n_embd_q();
    float* kt = k_.data() + t * c.n_embd_k();
    if (!w.q_norm.empty()) {
      for (int64_t h = 0; h < c.n_head; ++h)
        rms_norm(qt + h * c.head_dim, w.q_norm.data(), c.head_dim, c.rms_eps, qt + h * c.head_dim);
      for (int64_t h = 0; h < c.n_head_kv; ++h)
        rms_norm(kt + h * c.head_dim, w.k_norm.data(), c.head_dim, c.rms_eps, kt + h * c.head_dim);
    }
    const int64_t pos = batch.pos[sz(t)];
    const float* cs = rope_cs_.data() + t * c.n_rot;
    rope_rotate(qt, c.n_head, c.head_dim, c.n_rot, cs, mode);
    rope_rotate(kt, c.n_head_kv, c.head_dim, c.n_rot, cs, mode);
    cache_.store(local, batch.seq[sz(t)], pos, kt, v_.data() + t * c.n_embd_v(), vec_);
  });

  attn_.resize(sz(n_tokens * c.n_head * c.head_dim_v));
  const AttentionShape shape{c.n_head, c.n_head_kv, c.head_dim, c.head_dim_v};
  attention(shape, cache_, local, batch, q_.data(), attn_.data(), pool_, vec_, attention_scratch_);
  proj_.resize(sz(n_tokens * n_embd));
  const TensorView* ffn_first[] = {c.is_moe() ? &w.ffn_gate_inp : &w.ffn_gate, &w.ffn_up};
  matmul(w.wo, attn_.data(), n_tokens, proj_.data(), pool_, scratch_, NextWeights{ffn_first}.first(c.is_moe() ? 1 : 2));
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
  if (c.is_moe()) {
    ffn_.moe(w, c, norm_.data(), n_tokens, proj_.data(), pool_, after);
  } else {
    ffn_.dense(w, c, norm_.data(), n_tokens, proj_.data(), pool_, after);
  }
  add_residual(n_tokens, n_embd);
}

void Stage::add_residual(int64_t n_tokens, int64_t n_embd) {
  for_each_token(pool_, n_tokens, [&](int64_t t) {
    float* x = x_.data() + t * n_embd;
    const float* p = proj_.data() + t * n_embd;
    for (int64_t i = 0; i < n_embd; ++i) x[i] += p[i];
  });
}

}  // namespace tessera
