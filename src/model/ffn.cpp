// MoE groups the batch's tokens by expert so each expert's weights are read once per batch (prefill), and
// applies llama.cpp's gating: softmax over all experts, top-k, weights renormalised over the chosen k.
#include "model/ffn.h"

#include <algorithm>
#include <numeric>

#include "model/shard.h"
#include "model/token_loop.h"
#include "tensor/tensor_ops.h"

namespace tessera {

void FeedForward::dense(const LayerWeights& w, int64_t n_ff, GatedActivation act, const float* x, int64_t n_tokens,
                        float* out, ThreadPool& pool, NextWeights next) {
  const auto n = static_cast<size_t>(n_tokens * n_ff);
  gate_.resize(n);
  up_.resize(n);
  hidden_.resize(n);
  const MatmulOut gate_up[] = {{&w.ffn_gate, gate_.data()}, {&w.ffn_up, up_.data()}};
  const TensorView* down[] = {&w.ffn_down};
  matmul_multi(gate_up, x, n_tokens, pool, scratch_, down);
  glu_rows(act, gate_.data(), up_.data(), n_ff, n_ff, n_tokens, pool);
  matmul(w.ffn_down, hidden_.data(), n_tokens, out, pool, scratch_, next);
}

void FeedForward::moe(const LayerWeights& w, const ModelConfig& c, GatedActivation act, const float* x,
                      const float* router_x, int64_t n_tokens, float* out, ThreadPool& pool, NextWeights next,
                      const DenseBeside* dense) {
  const int64_t n_exp = c.n_expert;
  const int64_t k = c.n_expert_used;
  const int64_t n_embd = c.n_embd;
  router_.resize(static_cast<size_t>(n_tokens * n_exp));
  matmul(w.ffn_gate_inp, router_x != nullptr ? router_x : x, n_tokens, router_.data(), pool, scratch_);

  // By the index among the experts w holds; kept between calls, like the buffers below, so that a decode step
  // allocates nothing.
  Routing& routed = routed_;
  routed.resize(static_cast<size_t>(w.shape.n_expert));
  for (auto& tokens : routed) tokens.clear();
  std::vector<int64_t>& order = order_;
  order.resize(static_cast<size_t>(n_exp));
  if (w.holders) {
    deal_load_.assign(static_cast<size_t>(w.n_ranks), 0.0);
    dealt_.resize(static_cast<size_t>(k));
  }
  for (int64_t t = 0; t < n_tokens; ++t) {
    float* p = router_.data() + t * n_exp;
    softmax(p, n_exp);
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + k, order.end(),
                      [p](int64_t a, int64_t b) { return p[a] > p[b] || (p[a] == p[b] && a < b); });
    float sum = 0.0f;
    for (int64_t i = 0; i < k; ++i) sum += p[order[static_cast<size_t>(i)]];
    sum = std::max(sum, 6.103515625e-5f);  // llama.cpp's floor against division by ~0
    if (w.holders) w.holders->deal(order.data(), k, deal_load_, dealt_.data());
    for (int64_t i = 0; i < k; ++i) {
      const int64_t e = order[static_cast<size_t>(i)];
      if (w.holders && dealt_[static_cast<size_t>(i)] != w.rank) continue;
      // The matrices here that hold (a piece of) expert e: [first, last).
      int64_t first = e - w.expert0, last = first + 1;
      if (!w.pieces_of.empty()) {
        first = w.pieces_of[static_cast<size_t>(e)];
        last = w.pieces_of[static_cast<size_t>(e + 1)];
      }
      for (int64_t local = std::max<int64_t>(first, 0); local < std::min(last, w.shape.n_expert); ++local) {
        if (!w.piece_shared.empty()) {
          const int shared = w.piece_shared[static_cast<size_t>(local)];
          if (shared >= 0 && shared_piece_rank(t * k + i, shared, w.shared_per_expert, w.n_ranks) != w.rank) continue;
        }
        // Gemma 4 scales each expert's output (ffn_down_exps.scale): folded into its routing weight, no extra pass.
        const float scale = w.ffn_down_exps_scale.empty() ? 1.0f : w.ffn_down_exps_scale[static_cast<size_t>(local)];
        routed[static_cast<size_t>(local)].emplace_back(t, p[e] / sum * scale);
      }
    }
  }

  std::fill(out, out + n_tokens * n_embd, 0.0f);
  // A few tokens: every expert matrix's row chunks shared by all threads. Many: whole expert matrices per thread,
  // since each gemm call prepares all of its tokens (and, without --repack, builds the tiles of its rows).
  experts_together(w, c, act, x, routed, out, pool,
                   n_tokens <= kBatchedExpertTokens ? EachSplit::Chunks : EachSplit::WholeJobs, next, dense, n_tokens);
}

// The chosen experts' rows laid out one expert after the other, so every expert's gate and up run in one pass of
// the pool (matmul_each) and every down in a second: two fork/joins per layer instead of three per expert. While
// the first pass ends, waiting threads read the downs' first rows ahead; while the second does, `next`'s.
void FeedForward::experts_together(const LayerWeights& w, const ModelConfig& c, GatedActivation act, const float* x,
                                   const Routing& routed, float* out, ThreadPool& pool, EachSplit split,
                                   NextWeights next, const DenseBeside* dense, int64_t n_tokens) {
  const int64_t n_embd = c.n_embd;
  const int64_t n_ff = w.shape.n_ff_exp;
  // Gemma 4 keeps each expert's gate and up as one matrix (gate rows first): one job of 2 n_ff rows per expert.
  const bool fused = !w.ffn_gate_up_exps.empty();
  std::vector<std::pair<int64_t, int64_t>>& active = active_;  // (expert, first row)
  active.clear();
  int64_t rows = 0;
  for (int64_t e = 0; e < w.shape.n_expert; ++e) {
    const auto m = static_cast<int64_t>(routed[static_cast<size_t>(e)].size());
    if (m == 0) continue;
    active.emplace_back(e, rows);
    rows += m;
  }
  gathered_.resize(static_cast<size_t>(rows * n_embd));
  gate_.resize(static_cast<size_t>(rows * n_ff * (fused ? 2 : 1)));
  up_.resize(static_cast<size_t>(rows * n_ff));
  hidden_.resize(static_cast<size_t>(rows * n_ff));
  expert_out_.resize(static_cast<size_t>(rows * n_embd));
  std::vector<TensorView>& views = views_;  // the jobs point into it: no reallocation below this reserve
  views.clear();
  views.reserve(3 * active.size());
  std::vector<const TensorView*>& downs = downs_;
  downs.clear();
  std::vector<MatmulJob>& jobs = jobs_;
  jobs.clear();
  if (dense != nullptr) {
    const auto n = static_cast<size_t>(n_tokens * dense->n_ff);
    dense_gate_.resize(n);
    dense_up_.resize(n);
    dense_hidden_.resize(n);
    jobs.push_back({&w.ffn_gate, dense->x, n_tokens, dense_gate_.data()});
    jobs.push_back({&w.ffn_up, dense->x, n_tokens, dense_up_.data()});
    downs.push_back(&w.ffn_down);
  }
  for (const auto& [e, row0] : active) {
    const auto& tokens = routed[static_cast<size_t>(e)];
    const auto m = static_cast<int64_t>(tokens.size());
    // A single token's row is read where it is: the experts that share it then share its conversion too.
    const float* in = x + tokens[0].first * n_embd;
    if (m > 1) {
      for (int64_t i = 0; i < m; ++i) {
        std::copy_n(x + tokens[static_cast<size_t>(i)].first * n_embd, n_embd, gathered_.data() + (row0 + i) * n_embd);
      }
      in = gathered_.data() + row0 * n_embd;
    }
    if (fused) {
      views.push_back(w.ffn_gate_up_exps.slice_rows(e * 2 * n_ff, 2 * n_ff));
      jobs.push_back({&views.back(), in, m, gate_.data() + row0 * 2 * n_ff});
    } else {
      views.push_back(w.ffn_gate_exps.slice_rows(e * n_ff, n_ff));
      jobs.push_back({&views.back(), in, m, gate_.data() + row0 * n_ff});
      views.push_back(w.ffn_up_exps.slice_rows(e * n_ff, n_ff));
      jobs.push_back({&views.back(), in, m, up_.data() + row0 * n_ff});
    }
    views.push_back(w.ffn_down_exps.slice_rows(e * n_embd, n_embd));
    downs.push_back(&views.back());
  }
  matmul_each(jobs, pool, scratch_, split, downs);
  if (dense != nullptr) {
    glu_rows(act, dense_gate_.data(), dense_up_.data(), dense->n_ff, dense->n_ff, n_tokens, pool, dense_hidden_.data());
    downs.erase(downs.begin());
  }
  if (fused) {
    glu_rows(act, gate_.data(), gate_.data() + n_ff, 2 * n_ff, n_ff, rows, pool);
  } else {
    glu_rows(act, gate_.data(), up_.data(), n_ff, n_ff, rows, pool);
  }
  jobs.clear();
  if (dense != nullptr) jobs.push_back({&w.ffn_down, dense_hidden_.data(), n_tokens, dense->out});
  for (size_t i = 0; i < active.size(); ++i) {
    const auto [e, row0] = active[i];
    const auto m = static_cast<int64_t>(routed[static_cast<size_t>(e)].size());
    jobs.push_back({downs[i], hidden_.data() + row0 * n_ff, m, expert_out_.data() + row0 * n_embd});
  }
  matmul_each(jobs, pool, scratch_, split, next);
  // In expert order, as the one-expert-at-a-time path adds them: the sums round the same way.
  for (const auto& [e, row0] : active) add_expert_out(routed[static_cast<size_t>(e)], row0, n_embd, out);
}

void FeedForward::add_expert_out(const std::vector<std::pair<int64_t, float>>& tokens, int64_t row0, int64_t n_embd,
                                 float* out) const {
  for (size_t i = 0; i < tokens.size(); ++i) {
    const auto [t, weight] = tokens[i];
    float* dst = out + t * n_embd;
    const float* src = expert_out_.data() + (row0 + static_cast<int64_t>(i)) * n_embd;
    for (int64_t j = 0; j < n_embd; ++j) dst[j] += weight * src[j];
  }
}

void FeedForward::glu_rows(GatedActivation act, const float* gate, const float* up, int64_t stride, int64_t n_ff,
                           int64_t n_rows, ThreadPool& pool, float* hidden) {
  float* const base = hidden != nullptr ? hidden : hidden_.data();
  for_each_token(pool, n_rows, [&](int64_t t) {
    float* h = base + t * n_ff;
    if (act.act == FfnActivation::Silu) {
      swiglu(gate + t * stride, up + t * stride, n_ff, h);
    } else {
      geglu(gate + t * stride, up + t * stride, n_ff, h, act.gelu_table);
    }
  });
}

}  // namespace tessera
