// ModelWeights::sharded: one rank's slices of every matrix, Megatron-style. q, k and v keep the rank's heads (rows),
// the attention output its heads' columns; gate and up keep its FFN rows, down their columns; so each rank's
// partial outputs add up to the layer's (one all-reduce after attention, one after the FFN). Experts are split the
// same way, or held whole by one rank each (expert parallelism). The output head keeps a range of vocabulary rows.
// Columns are cut in whole quant blocks; a cut inside a block is held in f32 instead.
#include <algorithm>
#include <cstring>
#include <numeric>
#include <set>

#include "model/model_weights.h"
#include "tensor/quant.h"
#include "util/error.h"

namespace tessera {
namespace {

using Range = std::pair<int64_t, int64_t>;

// One matrix's slice: rows (ranges of the source's rows) by columns [c0, c1), written at `offset` of the buffer.
struct Cut {
  TensorView* view;
  TensorView src;
  std::vector<Range> rows;
  std::vector<int64_t> starts;  // the first column of each range of rows (their width is c1 - c0); empty: c0
  int64_t c0, c1;
  std::array<int64_t, 4> ne;
  bool as_f32;
  size_t row_bytes;
  size_t offset;
};

class ShardBuilder {
 public:
  // The view becomes rows x [c0, c1) of itself, shaped `ne` (ne[0] = c1 - c0).
  // starts: a first column per range of rows instead of c0 (blocks of different columns per expert piece).
  void cut(TensorView& view, std::vector<Range> rows, int64_t c0, int64_t c1, std::array<int64_t, 4> ne,
           std::vector<int64_t> starts = {}) {
    if (view.empty()) return;
    cut_views_.insert(&view);
    cut_data_.insert(view.data);
    if (c1 <= c0 || ne[1] == 0) {  // this rank holds none of it
      view = TensorView{};
      return;
    }
    const auto& traits = type_traits(view.type);
    const int64_t bs = traits.block_size;
    bool aligned = c0 % bs == 0 && (c1 % bs == 0 || c1 == view.cols());
    for (int64_t s : starts)
      aligned = aligned && s % bs == 0 && ((s + c1 - c0) % bs == 0 || s + c1 - c0 == view.cols());
    const bool whole = c0 == 0 && c1 == view.cols() && starts.empty();
    Cut c{&view, view, std::move(rows), std::move(starts), c0, c1, ne, !(whole || aligned), 0, 0};
    c.row_bytes = c.as_f32 ? static_cast<size_t>(c1 - c0) * sizeof(float) : row_size(view.type, c1 - c0);
    int64_t n_rows = 0;
    for (const auto& [r0, r1] : c.rows) n_rows += r1 - r0;
    c.offset = total_;
    total_ += (static_cast<size_t>(n_rows) * c.row_bytes + 63) / 64 * 64;
    cuts_.push_back(std::move(c));
  }

  // What the copies would read of their sources: a run of rows each, the whole row for a cut held in f32.
  struct Run {
    const uint8_t* first;
    uint64_t bytes, stride, count;
  };
  std::vector<Run> runs() const {
    std::vector<Run> out;
    for (const Cut& c : cuts_) {
      const auto& traits = type_traits(c.src.type);
      for (size_t i = 0; i < c.rows.size(); ++i) {
        const auto [r0, r1] = c.rows[i];
        if (r1 <= r0) continue;
        const int64_t c0 = c.starts.empty() ? c.c0 : c.starts[i];
        const size_t skip = c.as_f32 ? 0 : static_cast<size_t>(c0 / traits.block_size) * traits.type_size;
        out.push_back({c.src.row(r0) + skip, c.as_f32 ? c.src.row_bytes : c.row_bytes, c.src.row_bytes,
                       static_cast<uint64_t>(r1 - r0)});
      }
    }
    return out;
  }
  const std::set<const TensorView*>& cut_views() const { return cut_views_; }
  const std::set<const uint8_t*>& cut_data() const { return cut_data_; }

  std::shared_ptr<const HugeBuffer> build(ThreadPool& pool) {
    auto buffer = std::make_shared<HugeBuffer>(std::max<size_t>(total_, 64));
    uint8_t* base = buffer->data();
    pool.parallel_for(static_cast<int64_t>(cuts_.size()), [&](int64_t i0, int64_t i1) {
      std::vector<float> row;
      for (int64_t i = i0; i < i1; ++i) copy(cuts_[static_cast<size_t>(i)], base, row);
    });
    for (const Cut& c : cuts_) {
      TensorView v;
      v.type = c.as_f32 ? GgmlType::F32 : c.src.type;
      v.ne = c.ne;
      v.data = base + c.offset;
      v.row_bytes = c.row_bytes;
      *c.view = v;
    }
    return buffer;
  }

 private:
  static void copy(const Cut& c, uint8_t* base, std::vector<float>& row) {
    uint8_t* dst = base + c.offset;
    const auto& traits = type_traits(c.src.type);
    for (size_t i = 0; i < c.rows.size(); ++i) {
      const auto [r0, r1] = c.rows[i];
      const int64_t c0 = c.starts.empty() ? c.c0 : c.starts[i];
      const size_t skip = static_cast<size_t>(c0 / traits.block_size) * traits.type_size;
      for (int64_t r = r0; r < r1; ++r, dst += c.row_bytes) {
        if (!c.as_f32) {
          std::memcpy(dst, c.src.row(r) + skip, c.row_bytes);
          continue;
        }
        row.resize(static_cast<size_t>(c.src.cols()));
        dequantize_row(c.src.type, c.src.row(r), row.data(), c.src.cols());
        std::memcpy(dst, row.data() + c0, c.row_bytes);
      }
    }
  }

  std::vector<Cut> cuts_;
  size_t total_ = 0;
  std::set<const TensorView*> cut_views_;  // the views cut (some to nothing)
  std::set<const uint8_t*> cut_data_;      // their sources' data
};

std::vector<float> slice(const std::vector<float>& v, int64_t first, int64_t count) {
  if (v.empty()) return v;
  return std::vector<float>(v.begin() + first, v.begin() + first + count);
}

// An FFN's rows cut on quant-block boundaries of the down projection's columns: whole blocks per rank, so each
// rank quantizes and sums exactly the blocks one node does. With fewer blocks than ranks some ranks hold none.
Range column_share(int64_t cols, const TensorView& w, const ShardSpec& spec, const std::string& what) {
  const int64_t bs = w.empty() ? 1 : type_traits(w.type).block_size;
  const int64_t units = (cols + bs - 1) / bs;
  const auto [u0, u1] = share_range(units, spec, what, units < spec.n_ranks);
  return {std::min(cols, u0 * bs), std::min(cols, u1 * bs)};
}

// Pieces of experts held as one stack of matrices (whole experts and their copies under --ep, blocks of every
// expert under --tp): piece i is rows [first, first + m) of its expert's gate and up (both halves of a fused
// gate_up) and the same columns of its down projection. pieces_of counts each expert's pieces (as prefix sums) and
// the down projection's scales follow the pieces.
struct HeldPiece {
  int64_t expert;
  int64_t first;
};

void cut_held_pieces(ShardBuilder& b, LayerWeights& lw, const std::vector<HeldPiece>& pieces, int64_t n_exp, int64_t F,
                     int64_t m, int64_t n_embd) {
  const auto n = static_cast<int64_t>(pieces.size());
  std::vector<Range> rows, fused, down_rows;
  std::vector<int64_t> starts;
  std::vector<float> scale;
  lw.pieces_of.assign(static_cast<size_t>(n_exp + 1), 0);
  for (const HeldPiece& p : pieces) {
    const int64_t e = p.expert, f0 = p.first;
    rows.emplace_back(e * F + f0, e * F + f0 + m);
    if (m == F) {
      fused.emplace_back(e * 2 * F, (e + 1) * 2 * F);
    } else {
      fused.emplace_back(e * 2 * F + f0, e * 2 * F + f0 + m);
      fused.emplace_back(e * 2 * F + F + f0, e * 2 * F + F + f0 + m);
    }
    down_rows.emplace_back(e * n_embd, (e + 1) * n_embd);
    starts.push_back(f0);
    ++lw.pieces_of[static_cast<size_t>(e + 1)];
    if (!lw.ffn_down_exps_scale.empty()) scale.push_back(lw.ffn_down_exps_scale[static_cast<size_t>(e)]);
  }
  for (int64_t e = 0; e < n_exp; ++e) lw.pieces_of[static_cast<size_t>(e + 1)] += lw.pieces_of[static_cast<size_t>(e)];
  // Whole experts need no first column per piece.
  if (std::all_of(starts.begin(), starts.end(), [](int64_t f) { return f == 0; })) starts.clear();
  b.cut(lw.ffn_gate_exps, rows, 0, n_embd, {n_embd, m, n, 1});
  b.cut(lw.ffn_up_exps, rows, 0, n_embd, {n_embd, m, n, 1});
  b.cut(lw.ffn_gate_up_exps, fused, 0, n_embd, {n_embd, 2 * m, n, 1});
  b.cut(lw.ffn_down_exps, down_rows, 0, m, {m, n_embd, n, 1}, starts);
  lw.ffn_down_exps_scale = std::move(scale);
}
}  // namespace

std::shared_ptr<const ModelWeights> ModelWeights::sharded(const std::shared_ptr<const ModelWeights>& weights,
                                                          const ShardSpec& spec, ThreadPool& pool) {
  return shard_impl(weights, spec, &pool, nullptr);
}

std::vector<ShareExtent> ModelWeights::share_extents(const std::shared_ptr<const ModelWeights>& weights,
                                                     const ShardSpec& spec) {
  std::vector<ShareExtent> out;
  if (!spec.sharded()) {
    for (const auto& t : weights->source().tensors()) out.push_back({t.name, 0, t.n_bytes, t.n_bytes, 1});
    return out;
  }
  shard_impl(weights, spec, nullptr, &out);
  return out;
}

std::shared_ptr<const ModelWeights> ModelWeights::shard_impl(const std::shared_ptr<const ModelWeights>& weights,
                                                             const ShardSpec& spec, ThreadPool* pool,
                                                             std::vector<ShareExtent>* extents) {
  if (!spec.sharded()) return weights;
  if (weights->shard_.sharded()) fail("the weights are already a shard");
  auto w = std::shared_ptr<ModelWeights>(new ModelWeights(*weights));
  w->shard_ = spec;
  const ModelConfig& c = w->config_;
  ShardBuilder b;
  std::shared_ptr<const ExpertHolders> holders;  // the same for every layer with as many experts
  for (int64_t l = w->layers_.begin; l < w->layers_.end; ++l) {
    LayerWeights& lw = w->layer_weights_[static_cast<size_t>(l - w->layers_.begin)];
    LayerShape& s = lw.shape;
    const std::string where = fmt::format("layer {}", l);
    if (l != s.kv_source && !(s.kv_source >= w->layers_.begin)) {
      fail("{}: a shard cannot reuse the K/V of layer {} from another stage", where, s.kv_source);
    }
    // Attention: whole KV-head groups per rank when there are at least as many KV heads as ranks; else a share of
    // the query heads, each rank holding (and computing) the KV heads its query heads read.
    if (spec.tp) {
      const int64_t bs = lw.wo.empty() ? 1 : type_traits(lw.wo.type).block_size;
      const AttentionCut cut = attention_cut(s.n_head, s.n_head_kv, s.head_dim_v, bs, spec, where);
      const int64_t q0 = cut.q0, q1 = cut.q1, k0 = cut.k0, k1 = cut.k1;
      lw.attn_split = cut.split;
      const int64_t hd = s.head_dim;
      const int64_t hv = s.head_dim_v;
      if (lw.attn_split) {
        b.cut(lw.wq, {{q0 * hd, q1 * hd}}, 0, c.n_embd, {c.n_embd, (q1 - q0) * hd, 1, 1});
        b.cut(lw.wk, {{k0 * hd, k1 * hd}}, 0, c.n_embd, {c.n_embd, (k1 - k0) * hd, 1, 1});
        b.cut(lw.wv, {{k0 * hv, k1 * hv}}, 0, c.n_embd, {c.n_embd, (k1 - k0) * hv, 1, 1});
        b.cut(lw.wo, {{0, c.n_embd}}, q0 * hv, q1 * hv, {(q1 - q0) * hv, c.n_embd, 1, 1});
        lw.q_bias = slice(lw.q_bias, q0 * hd, (q1 - q0) * hd);
        lw.k_bias = slice(lw.k_bias, k0 * hd, (k1 - k0) * hd);
        lw.v_bias = slice(lw.v_bias, k0 * hv, (k1 - k0) * hv);
      }
      lw.q_head0 = q0;
      lw.kv_head0 = k0;
      s.n_head = q1 - q0;
      s.n_head_kv = k1 - k0;
      // Dense FFN (also Gemma 4's MLP beside the experts): rows of gate and up, columns of down.
      if (!lw.ffn_down.empty()) {
        const auto [f0, f1] = column_share(s.n_ff, lw.ffn_down, spec, where + "'s FFN");
        b.cut(lw.ffn_gate, {{f0, f1}}, 0, c.n_embd, {c.n_embd, f1 - f0, 1, 1});
        b.cut(lw.ffn_up, {{f0, f1}}, 0, c.n_embd, {c.n_embd, f1 - f0, 1, 1});
        b.cut(lw.ffn_down, {{0, c.n_embd}}, f0, f1, {f1 - f0, c.n_embd, 1, 1});
        s.n_ff = f1 - f0;
      }
    }
    if (!s.moe || lw.ffn_down_exps.empty()) continue;
    const int64_t n_exp = s.n_expert;
    const int64_t F = s.n_ff_exp;
    if (spec.ep && spec.ep_redundancy > 0) {
      // Whole experts, some of them held by two ranks: the matrices here are the held ones in ascending order.
      if (!holders || holders->n_expert() != n_exp) {
        holders = std::make_shared<const ExpertHolders>(n_exp, spec, where + "'s experts");
      }
      std::vector<HeldPiece> pieces;
      for (int64_t e : holders->held(spec.rank)) pieces.push_back({e, 0});
      cut_held_pieces(b, lw, pieces, n_exp, F, F, c.n_embd);
      lw.holders = holders;
      lw.rank = spec.rank;
      lw.n_ranks = spec.n_ranks;
      s.n_expert = static_cast<int64_t>(pieces.size());
    } else if (spec.ep) {
      // Whole experts per rank.
      const auto [e0, e1] = share_range(n_exp, spec, where + "'s experts");
      const int64_t n = e1 - e0;
      b.cut(lw.ffn_gate_exps, {{e0 * F, e1 * F}}, 0, c.n_embd, {c.n_embd, F, n, 1});
      b.cut(lw.ffn_up_exps, {{e0 * F, e1 * F}}, 0, c.n_embd, {c.n_embd, F, n, 1});
      b.cut(lw.ffn_gate_up_exps, {{e0 * 2 * F, e1 * 2 * F}}, 0, c.n_embd, {c.n_embd, 2 * F, n, 1});
      b.cut(lw.ffn_down_exps, {{e0 * c.n_embd, e1 * c.n_embd}}, 0, F, {F, c.n_embd, n, 1});
      lw.ffn_down_exps_scale = slice(lw.ffn_down_exps_scale, e0, n);
      lw.expert0 = e0;
      s.n_expert = n;
    } else if (spec.tp) {
      // Pieces of every expert's rows (expert_pieces): whole blocks of the down projection's columns.
      const int64_t bs = type_traits(lw.ffn_down_exps.type).block_size;
      const int64_t units = F % bs == 0 ? F / bs : 1;  // a partial block: one unit, split by column_share below
      std::vector<ExpertPiece> pieces;
      if (F % bs == 0) {
        pieces = expert_pieces(n_exp, units, spec, where + "'s expert FFN");
      } else {
        const auto [f0, f1] = column_share(F, lw.ffn_down_exps, spec, where + "'s expert FFN");
        for (int64_t e = 0; e < n_exp; ++e) pieces.push_back({e, f0, f1 - f0});
      }
      const int64_t unit_rows = F % bs == 0 ? bs : 1;
      const int64_t m = pieces.empty() ? 0 : pieces.front().count * unit_rows;
      const bool any_shared =
          std::any_of(pieces.begin(), pieces.end(), [](const ExpertPiece& p) { return p.shared >= 0; });
      std::vector<HeldPiece> held;
      for (const ExpertPiece& p : pieces) {
        if (any_shared) {
          lw.piece_shared.push_back(static_cast<int8_t>(p.shared));
          lw.shared_per_expert = std::max(lw.shared_per_expert, p.shared + 1);
        }
        held.push_back({p.expert, p.first * unit_rows});
      }
      cut_held_pieces(b, lw, held, n_exp, F, m, c.n_embd);
      lw.rank = spec.rank;
      lw.n_ranks = spec.n_ranks;
      s.n_ff_exp = m;
      s.n_expert = static_cast<int64_t>(pieces.size());
    }
  }
  if (!w->output_.empty()) {
    const auto [v0, v1] = share_range(c.n_vocab, spec, "the vocabulary");
    b.cut(w->output_, {{v0, v1}}, 0, c.n_embd, {c.n_embd, v1 - v0, 1, 1});
    w->vocab0_ = v0;
  }
  if (extents == nullptr) {
    w->shard_copy_ = b.build(*pool);
    return w;
  }
  // A tensor is read whole unless every view of it was cut (a tied head is cut by vocabulary, its embedding not).
  std::vector<const uint8_t*> whole;
  const auto note = [&](const TensorView& v) {
    if (!v.empty() && b.cut_views().count(&v) == 0) whole.push_back(v.data);
  };
  for (const auto& lw : w->layer_weights_) {
    for (const TensorView* v :
         {&lw.wq, &lw.wk, &lw.wv, &lw.wo, &lw.ffn_gate, &lw.ffn_up, &lw.ffn_down, &lw.ffn_gate_inp, &lw.ffn_gate_exps,
          &lw.ffn_up_exps, &lw.ffn_down_exps, &lw.ffn_gate_up_exps, &lw.ple_gate, &lw.ple_proj}) {
      note(*v);
    }
  }
  for (const TensorView* v : {&w->per_layer_proj_, &w->output_, &w->token_embd_, &w->per_layer_tok_embd_}) note(*v);
  const auto runs = b.runs();
  for (const auto& t : w->source_->tensors()) {
    const auto data = w->source_->tensor_data(t);
    const auto inside = [&](const uint8_t* p) { return p >= data.data() && p < data.data() + data.size(); };
    const bool cut = std::any_of(b.cut_data().begin(), b.cut_data().end(), inside);
    if (!cut || std::any_of(whole.begin(), whole.end(), inside)) {
      extents->push_back({t.name, 0, t.n_bytes, t.n_bytes, 1});
      continue;
    }
    for (const auto& r : runs) {
      if (inside(r.first)) {
        extents->push_back({t.name, static_cast<uint64_t>(r.first - data.data()), r.bytes, r.stride, r.count});
      }
    }
  }
  return w;
}

}  // namespace tessera
