// Tiled attention with the online softmax, on every kernel path the CPU has: against a double-precision two-pass
// reference (several key blocks, GQA groups, head sizes that leave partial vectors, f16 and f32 caches, mixed
// sequences in one batch), and bit-identical results for a token however the batch around it is made up.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "model/attention.h"
#include "support/isa_test.h"
#include "tensor/fp16.h"

namespace tessera {
namespace {

class Attention : public test::IsaTest {};
TESSERA_ISA_TEST_SUITE(Attention);

struct Fixture {
  AttentionShape shape;
  KvCache cache;
  std::vector<float> q;  // [token][n_head * head_dim] for every (seq, pos) of `queries`
  Batch queries;         // one query per cached position of every sequence

  Fixture(const AttentionShape& s, GgmlType type, const std::vector<int>& lengths, float q_spread)
      : shape(s),
        cache(KvCacheConfig::uniform(1, static_cast<int64_t>(lengths.size()), 300, s.n_head_kv, s.head_dim,
                                     s.head_dim_v, type)) {
    std::mt19937 rng(11);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::normal_distribution<float> n(0.0f, q_spread);
    for (int seq = 0; seq < static_cast<int>(lengths.size()); ++seq) {
      for (int p = 0; p < lengths[static_cast<size_t>(seq)]; ++p) {
        std::vector<float> k(static_cast<size_t>(s.n_head_kv * s.head_dim)),
            v(static_cast<size_t>(s.n_head_kv * s.head_dim_v));
        for (auto& x : k) x = u(rng);
        for (auto& x : v) x = u(rng);
        cache.store(0, seq, p, k.data(), v.data());
        queries.add(0, seq, p, false);
        for (int64_t i = 0; i < s.n_head * s.head_dim; ++i) q.push_back(n(rng));
      }
      cache.set_length(seq, lengths[static_cast<size_t>(seq)]);
    }
  }

  // Element i of the key (or value) row stored at pos: head i / width, element i % width of it.
  float cached(bool key, int64_t seq, int64_t pos, int64_t i) const {
    const int64_t width = key ? shape.head_dim : shape.head_dim_v;
    const uint8_t* head = key ? cache.k_head(0, seq, i / width) : cache.v_head(0, seq, i / width);
    const int64_t at = pos * width + i % width;
    if (cache.config().type == GgmlType::F16) return fp16_to_fp32(reinterpret_cast<const uint16_t*>(head)[at]);
    return reinterpret_cast<const float*>(head)[at];
  }

  // Query j of `queries`, head h: softmax(q k / sqrt(d)) v over keys 0..pos in double.
  std::vector<double> reference(size_t j, int64_t h) const {
    const int64_t seq = queries.seq[j], pos = queries.pos[j];
    const int64_t g = h / (shape.n_head / shape.n_head_kv);
    std::vector<double> scores(static_cast<size_t>(pos + 1));
    double mx = -1e300;
    for (int64_t p = 0; p <= pos; ++p) {
      double dot = 0;
      for (int64_t i = 0; i < shape.head_dim; ++i)
        dot += double{q[(j * shape.n_head + h) * shape.head_dim + i]} * cached(true, seq, p, g * shape.head_dim + i);
      scores[static_cast<size_t>(p)] = dot / std::sqrt(static_cast<double>(shape.head_dim));
      mx = std::max(mx, scores[static_cast<size_t>(p)]);
    }
    double sum = 0;
    for (auto& x : scores) sum += (x = std::exp(x - mx));
    std::vector<double> out(static_cast<size_t>(shape.head_dim_v), 0.0);
    for (int64_t p = 0; p <= pos; ++p)
      for (int64_t i = 0; i < shape.head_dim_v; ++i)
        out[static_cast<size_t>(i)] +=
            scores[static_cast<size_t>(p)] / sum * cached(false, seq, p, g * shape.head_dim_v + i);
    return out;
  }

  // Runs attention for the queries at `picks` (indices into `queries`) as one batch.
  std::vector<float> run(const std::vector<size_t>& picks, Isa isa, ThreadPool& pool,
                         AttentionScratch* scratch = nullptr) const {
    Batch batch;
    std::vector<float> qb;
    for (size_t j : picks) {
      batch.add(0, queries.seq[j], queries.pos[j], false);
      qb.insert(qb.end(), q.begin() + static_cast<int64_t>(j) * shape.n_head * shape.head_dim,
                q.begin() + static_cast<int64_t>(j + 1) * shape.n_head * shape.head_dim);
    }
    std::vector<float> out(picks.size() * static_cast<size_t>(shape.n_head * shape.head_dim_v), NAN);
    if (scratch != nullptr) {
      attention(shape, cache, 0, batch, qb.data(), out.data(), pool, VecOps::get(isa), *scratch);
    } else {
      attention(shape, cache, 0, batch, qb.data(), out.data(), pool, VecOps::get(isa));
    }
    return out;
  }
};

std::vector<size_t> all_queries(const Fixture& f) {
  std::vector<size_t> picks(static_cast<size_t>(f.queries.size()));
  for (size_t j = 0; j < picks.size(); ++j) picks[j] = j;
  return picks;
}

TEST_P(Attention, MatchesTheDoubleReference) {
  ThreadPool pool(2);
  struct Case {
    AttentionShape shape;
    GgmlType type;
    float q_spread;
  };
  const Case cases[] = {
      {{8, 8, 8, 8}, GgmlType::F32, 1.0f},     // stories260K's heads: one row per item token
      {{32, 4, 64, 64}, GgmlType::F16, 1.0f},  // the 1b preset: groups of 8
      {{6, 2, 16, 20}, GgmlType::F32, 6.0f},   // value width != key width, a partial group of 8 outputs
      {{4, 1, 72, 72}, GgmlType::F16, 12.0f},  // one KV head for 4 queries; scores spread over hundreds
      {{3, 3, 5, 3}, GgmlType::F32, 2.0f},     // widths below a vector
  };
  for (const Case& c : cases) {
    // Sequence 0 spans three key blocks and a partial fourth; 1 and 2 are short; all share the batch.
    const Fixture f(c.shape, c.type, {150, 3, 65}, c.q_spread);
    {
      const Isa isa = this->isa();
      const std::vector<float> out = f.run(all_queries(f), isa, pool);
      double worst = 0;
      for (size_t j = 0; j < static_cast<size_t>(f.queries.size()); ++j) {
        for (int64_t h = 0; h < c.shape.n_head; ++h) {
          const std::vector<double> want = f.reference(j, h);
          for (int64_t i = 0; i < c.shape.head_dim_v; ++i) {
            const float got = out[(j * c.shape.n_head + h) * c.shape.head_dim_v + i];
            worst = std::max(worst, std::fabs(got - want[static_cast<size_t>(i)]));
          }
        }
      }
      // Values lie in [-1, 1]. The scores' f32 rounding grows with their size (q_spread), and e^score turns it
      // into a relative error of the weights: measured 1e-7 .. 4e-6 over these cases.
      EXPECT_LT(worst, 1e-6 * (1.0 + c.q_spread))
          << isa_name(isa) << " heads " << c.shape.n_head << "/" << c.shape.n_head_kv << " d " << c.shape.head_dim
          << " dv " << c.shape.head_dim_v;
    }
  }
}

TEST_P(Attention, ATokensResultDoesNotDependOnItsBatch) {
  ThreadPool pool(2);
  const Fixture f({32, 4, 64, 64}, GgmlType::F16, {150, 3, 65}, 3.0f);
  const std::vector<size_t> all = all_queries(f);
  {
    const Isa isa = this->isa();
    const std::vector<float> together = f.run(all, isa, pool);
    const size_t width = static_cast<size_t>(f.shape.n_head * f.shape.head_dim_v);
    // Each query alone (decode), and sequence 0 in reverse order in batches of 7 (other tile compositions).
    for (size_t j : {size_t{0}, size_t{63}, size_t{64}, size_t{149}, size_t{150}, size_t{152}, size_t{217}}) {
      const std::vector<float> alone = f.run({j}, isa, pool);
      for (size_t i = 0; i < width; ++i) {
        ASSERT_EQ(alone[i], together[j * width + i]) << isa_name(isa) << " query " << j << " element " << i;
      }
    }
    for (size_t first = 0; first < 150; first += 7) {
      std::vector<size_t> picks;
      for (size_t j = std::min<size_t>(first + 7, 150); j-- > first;) picks.push_back(j);
      const std::vector<float> part = f.run(picks, isa, pool);
      for (size_t k = 0; k < picks.size(); ++k) {
        for (size_t i = 0; i < width; ++i) {
          ASSERT_EQ(part[k * width + i], together[picks[k] * width + i]) << isa_name(isa) << " query " << picks[k];
        }
      }
    }
  }
}

// A scratch kept across calls (as a stage keeps one) serves shapes that need more and less room, in any order,
// with the results of a fresh one.
TEST_P(Attention, AScratchKeptAcrossCallsGivesTheSameResults) {
  ThreadPool pool(2);
  const Fixture small({8, 8, 16, 16}, GgmlType::F32, {20}, 1.0f);
  const Fixture large({32, 2, 80, 64}, GgmlType::F16, {90, 40}, 2.0f);
  {
    const Isa isa = this->isa();
    AttentionScratch kept;
    for (const Fixture* f : {&small, &large, &small, &large}) {
      for (const std::vector<size_t>& picks : {all_queries(*f), std::vector<size_t>{0}, std::vector<size_t>{19}}) {
        ASSERT_EQ(f->run(picks, isa, pool, &kept), f->run(picks, isa, pool)) << isa_name(isa);
      }
    }
  }
}

}  // namespace
}  // namespace tessera
