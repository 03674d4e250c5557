// A rank's share as a member without the model gets it: only the runs ModelWeights::share_extents lists, received
// through ShareReceiver into an image, give the same sharded weights (every view, byte for byte) as the whole file,
// and fewer bytes than the model under --tp.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstring>

#include "cluster/group_share.h"
#include "cluster/share_store.h"
#include "support/test_paths.h"
#include "util/error.h"

namespace tessera::cluster {
namespace {

// The share's bytes through a receiver, in chunks of 1000 bytes (rows split across chunks).
std::shared_ptr<const gguf::TensorSource> receive(const ShareSource& s) {
  ShareReceiver receiver(s.table, std::nullopt, "share");
  net::WeightChunk chunk;
  chunk.hash = s.table.key;
  std::vector<uint8_t> all;
  for_each_share_row(s.table, [&](uint32_t tensor, uint64_t offset, uint64_t n) {
    const auto bytes = s.data[tensor].subspan(offset, n);
    all.insert(all.end(), bytes.begin(), bytes.end());
  });
  for (size_t at = 0; at < all.size(); at += 1000) {
    chunk.offset = at;
    chunk.data.assign(all.begin() + static_cast<std::ptrdiff_t>(at),
                      all.begin() + static_cast<std::ptrdiff_t>(std::min(all.size(), at + 1000)));
    receiver.receive(chunk);
  }
  EXPECT_TRUE(receiver.complete());
  return receiver.finish();
}

void expect_same_view(const TensorView& a, const TensorView& b, const std::string& what) {
  ASSERT_EQ(a.empty(), b.empty()) << what;
  if (a.empty()) return;
  ASSERT_EQ(a.type, b.type) << what;
  ASSERT_EQ(a.ne, b.ne) << what;
  ASSERT_EQ(a.row_bytes, b.row_bytes) << what;
  for (int64_t r = 0; r < a.rows(); ++r) {
    ASSERT_EQ(std::memcmp(a.row(r), b.row(r), a.row_bytes), 0) << what << " row " << r;
  }
}

void expect_share_matches(const std::string& fixture, bool tp, bool ep, int n, std::vector<double> shares = {}) {
  const auto path = test::shared_dir() / "fixtures/models" / (fixture + ".gguf");
  const auto whole = ModelWeights::load(path);
  ThreadPool pool(1);
  for (int rank = 0; rank < n; ++rank) {
    ShardSpec spec;
    spec.rank = rank;
    spec.n_ranks = n;
    spec.tp = tp;
    spec.ep = ep;
    spec.shares = shares;
    const ShareSource s = share_source(whole, spec, net::content_hash(std::vector<uint8_t>{1}));
    const auto from_share = ModelWeights::load(receive(s), {0, -1}, true, true);
    const auto a = ModelWeights::sharded(whole, spec, pool);
    const auto b = ModelWeights::sharded(from_share, spec, pool);
    const std::string who = fmt::format("{} rank {} of {}", fixture, rank, n);
    for (int64_t l = 0; l < a->config().n_layer; ++l) {
      const LayerWeights& x = a->layer(l);
      const LayerWeights& y = b->layer(l);
      const std::vector<std::pair<const TensorView*, const TensorView*>> views = {
          {&x.wq, &y.wq},
          {&x.wk, &y.wk},
          {&x.wv, &y.wv},
          {&x.wo, &y.wo},
          {&x.ffn_gate, &y.ffn_gate},
          {&x.ffn_up, &y.ffn_up},
          {&x.ffn_down, &y.ffn_down},
          {&x.ffn_gate_inp, &y.ffn_gate_inp},
          {&x.ffn_gate_exps, &y.ffn_gate_exps},
          {&x.ffn_up_exps, &y.ffn_up_exps},
          {&x.ffn_down_exps, &y.ffn_down_exps},
          {&x.ffn_gate_up_exps, &y.ffn_gate_up_exps}};
      for (size_t i = 0; i < views.size(); ++i) {
        expect_same_view(*views[i].first, *views[i].second, fmt::format("{} layer {} view {}", who, l, i));
      }
      EXPECT_EQ(x.attn_norm, y.attn_norm) << who;
      EXPECT_EQ(x.ffn_norm, y.ffn_norm) << who;
    }
    expect_same_view(a->token_embd(), b->token_embd(), who + " token_embd");
    expect_same_view(a->output(), b->output(), who + " output");
    EXPECT_EQ(a->output_norm(), b->output_norm()) << who;
    EXPECT_LT(s.bytes, s.model_bytes) << who;
  }
}

TEST(GroupShare, TensorParallelSharesRebuildTheSameWeights) {
  expect_share_matches("llama-f32", true, false, 2);
  expect_share_matches("llama-q8_0", true, false, 2);
  expect_share_matches("gemma4-f32", true, false, 2);
}

TEST(GroupShare, ExpertSharesRebuildTheSameWeights) {
  expect_share_matches("qwen3moe-f32", false, true, 2);
  expect_share_matches("mixtral-f32", false, true, 3);
  expect_share_matches("qwen3moe-f32", true, false, 3, {2, 1, 1});
}

TEST(GroupShare, ChunksOutOfOrderOrOfAnotherShareAreRefused) {
  const auto whole = ModelWeights::load(test::shared_dir() / "fixtures/models/llama-f32.gguf");
  ShardSpec spec;
  spec.rank = 1;
  spec.n_ranks = 2;
  const ShareSource s = share_source(whole, spec, net::content_hash(std::vector<uint8_t>{2}));
  ShareReceiver receiver(s.table, std::nullopt, "share");
  net::WeightChunk chunk{s.table.key, 8, {1, 2, 3}};
  EXPECT_THROW(receiver.receive(chunk), Error);
  chunk.offset = 0;
  chunk.hash = net::content_hash(std::vector<uint8_t>{3});
  EXPECT_THROW(receiver.receive(chunk), Error);
  EXPECT_THROW(receiver.finish(), Error);  // incomplete
}

}  // namespace
}  // namespace tessera::cluster
