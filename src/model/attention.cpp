// Attention as flash attention computes it: the query rows of a few tokens of one sequence that share a KV head
// form a work item; keys and values come from the cache in blocks, converted to f32 once per block for all of the
// item's rows, and each block is folded into every row's running softmax (attention_tile.h). No row keeps its
// n_pos scores.
#include "model/attention.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "util/error.h"

namespace tessera {
namespace {

// Query rows (tokens x heads of a group) per work item at most, unless one token's group has more: they share each
// converted key block.
constexpr int64_t kRowsPerItem = 64;

// Consecutive batch tokens of one sequence, at most `limit` of them: [first, last).
struct TokenRun {
  int64_t first;
  int64_t last;
};

// With a sliding window, a token whose window starts after position 0 forms a run of its own: the rows of a run
// share their first key, and the kernels mask only keys after a row's position.
std::vector<TokenRun> token_runs(const Batch& batch, int64_t limit, int64_t window) {
  auto alone = [&](int64_t t) { return window > 0 && batch.pos[static_cast<size_t>(t)] >= window; };
  std::vector<TokenRun> runs;
  for (int64_t t = 0; t < batch.size();) {
    int64_t u = t + 1;
    while (u < batch.size() && u - t < limit && !alone(t) && !alone(u) &&
           batch.seq[static_cast<size_t>(u)] == batch.seq[static_cast<size_t>(t)])
      ++u;
    runs.push_back({t, u});
    t = u;
  }
  return runs;
}

// Cells [c0, c0 + n) of one head's cached keys (or values), `width` elements each, as f32 rows.
void load_cells(const uint8_t* head, bool f16, int64_t width, int64_t c0, int64_t n, float* out, const VecOps& ops) {
  const int64_t first = c0 * width;
  if (f16) {
    ops.f16_to_f32(reinterpret_cast<const uint16_t*>(head) + first, out, n * width);
  } else {
    std::memcpy(out, reinterpret_cast<const float*>(head) + first, static_cast<size_t>(n * width) * sizeof(float));
  }
}

// Positions [p0, p0 + n) as f32 rows; a sliding layer's ring keeps position p in cell p mod n_cells.
void load_rows(const uint8_t* head, bool f16, int64_t width, int64_t n_cells, int64_t p0, int64_t n, float* out,
               const VecOps& ops) {
  const int64_t c0 = p0 % n_cells;
  const int64_t first = std::min(n, n_cells - c0);
  load_cells(head, f16, width, c0, first, out, ops);
  if (first < n) load_cells(head, f16, width, 0, n - first, out + first * width, ops);
}

// Asks for the cache lines of positions [p0, p0 + n) of one head's keys (or values), so that they come from memory
// while the block before them is computed: at long contexts the cache is read from memory, and each block's
// conversion otherwise waited for its lines after a stretch of arithmetic that read none.
void ask_for_rows(const uint8_t* head, bool f16, int64_t width, int64_t n_cells, int64_t p0, int64_t n) {
  const int64_t bytes = width * (f16 ? 2 : 4);
  p0 %= n_cells;
  n = std::min(n, n_cells - p0);
  const uint8_t* first = head + p0 * bytes;
  for (int64_t o = 0; o < n * bytes; o += 64) __builtin_prefetch(first + o, 0, 3);
}

}  // namespace

float* AlignedFloats::get(size_t n) {
  if (n > n_) {
    p_.reset(static_cast<float*>(::operator new[](n * sizeof(float), std::align_val_t{64})));
    n_ = n;
  }
  return p_.get();
}

void attention(const AttentionShape& s, const KvCache& cache, int64_t layer, const Batch& batch, const float* q,
               float* out, ThreadPool& pool, const VecOps& ops) {
  AttentionScratch scratch;
  attention(s, cache, layer, batch, q, out, pool, ops, scratch);
}

void attention(const AttentionShape& s, const KvCache& cache, int64_t layer, const Batch& batch, const float* q,
               float* out, ThreadPool& pool, const VecOps& ops, AttentionScratch& scratch) {
  const bool f16 = cache.config().type == GgmlType::F16;
  const KvLayer& kv = cache.layer(layer);
  if (kv.n_head_kv != s.n_head_kv || kv.head_dim_k != s.head_dim || kv.head_dim_v != s.head_dim_v) {
    fail("attention over {} KV heads of {}/{}, the cache keeps {} of {}/{}", s.n_head_kv, s.head_dim, s.head_dim_v,
         kv.n_head_kv, kv.head_dim_k, kv.head_dim_v);
  }
  const int64_t n_cells = kv.n_cells;
  const int64_t group = s.group > 0 ? s.group : s.n_head / s.n_head_kv;
  const int64_t d = s.head_dim;
  const int64_t dv = s.head_dim_v;
  const float scale = s.scale > 0.0f ? s.scale : 1.0f / std::sqrt(static_cast<float>(d));
  const int64_t tokens_per_item = std::max<int64_t>(1, kRowsPerItem / group);
  const std::vector<TokenRun> runs = token_runs(batch, tokens_per_item, s.window);
  const int64_t n_items = static_cast<int64_t>(runs.size()) * s.n_head_kv;
  const int64_t max_rows = tokens_per_item * group;

  if (scratch.threads.size() < static_cast<size_t>(pool.size()))
    scratch.threads.resize(static_cast<size_t>(pool.size()));
  // Items from a shared counter, one at a time: they differ in cost (later tokens see more keys).
  std::atomic<int64_t> next{0};
  pool.run([&](int thread) {
    AttentionScratch::Thread& buf = scratch.threads[static_cast<size_t>(thread)];
    float* const qr = buf.q.get(static_cast<size_t>(max_rows * d));
    float* const orow = buf.o.get(static_cast<size_t>(max_rows * dv));
    float* const ml = buf.ml.get(static_cast<size_t>(max_rows * 2));
    float* const keys = buf.keys.get(static_cast<size_t>(kAttnKeys * d));
    float* const values = buf.values.get(static_cast<size_t>(kAttnKeys * dv));
    float* const keys_t = buf.keys_t.get(static_cast<size_t>(kAttnKeys * d));
    std::vector<int32_t>& pos = buf.pos;
    pos.resize(static_cast<size_t>(max_rows));
    for (int64_t index = next.fetch_add(1, std::memory_order_relaxed); index < n_items;
         index = next.fetch_add(1, std::memory_order_relaxed)) {
      // Last runs first: they see the most keys, and the threads' last items should be the short ones.
      const int64_t item = n_items - 1 - index;
      const TokenRun run = runs[static_cast<size_t>(item / s.n_head_kv)];
      const int64_t g = item % s.n_head_kv;
      const int64_t slot = batch.seq[static_cast<size_t>(run.first)];
      // The query heads that read KV head g (all `group` of them, or a tensor-parallel rank's part of them).
      const int64_t qa = std::max<int64_t>(0, (s.kv_head0 + g) * group - s.q_head0);
      const int64_t qb = std::min<int64_t>(s.n_head, (s.kv_head0 + g + 1) * group - s.q_head0);
      const int64_t nh = qb - qa;
      const int64_t n_rows = (run.last - run.first) * nh;

      int32_t last_pos = 0;
      const int32_t first_pos = batch.pos[static_cast<size_t>(run.first)];
      // A run of several tokens starts at 0 (token_runs); a lone token at its window's first key.
      const int64_t first_key = s.window > 0 ? std::max<int64_t>(0, first_pos - s.window + 1) : 0;
      for (int64_t r = 0; r < n_rows; ++r) {
        const int64_t t = run.first + r / nh;
        const float* q_src = q + (t * s.n_head + qa + r % nh) * d;
        for (int64_t i = 0; i < d; ++i) qr[r * d + i] = q_src[i] * scale;
        pos[static_cast<size_t>(r)] = batch.pos[static_cast<size_t>(t)];
        last_pos = std::max(last_pos, batch.pos[static_cast<size_t>(t)]);
      }
      std::fill(orow, orow + n_rows * dv, 0.0f);
      std::fill(ml, ml + n_rows, -std::numeric_limits<float>::infinity());
      std::fill(ml + n_rows, ml + 2 * n_rows, 0.0f);
      const AttnRows rows{qr, orow, ml, ml + n_rows, pos.data(), n_rows};

      for (int64_t p0 = first_key; p0 <= last_pos; p0 += kAttnKeys) {
        const int64_t n = std::min<int64_t>(kAttnKeys, last_pos + 1 - p0);
        load_rows(cache.k_head(layer, slot, g), f16, d, n_cells, p0, n, keys, ops);
        load_rows(cache.v_head(layer, slot, g), f16, dv, n_cells, p0, n, values, ops);
        if (p0 + kAttnKeys <= last_pos) {
          const int64_t ahead = std::min<int64_t>(kAttnKeys, last_pos + 1 - p0 - kAttnKeys);
          ask_for_rows(cache.k_head(layer, slot, g), f16, d, n_cells, p0 + kAttnKeys, ahead);
          ask_for_rows(cache.v_head(layer, slot, g), f16, dv, n_cells, p0 + kAttnKeys, ahead);
        }
        ops.attend(rows, AttnKeys{keys, values, n, p0, d, dv, keys_t});
      }

      for (int64_t r = 0; r < n_rows; ++r) {
        const int64_t t = run.first + r / nh;
        const float inv = 1.0f / ml[n_rows + r];
        float* o = out + (t * s.n_head + qa + r % nh) * dv;
        for (int64_t i = 0; i < dv; ++i) o[i] = orow[r * dv + i] * inv;
      }
    }
  });
}

}  // namespace tessera
