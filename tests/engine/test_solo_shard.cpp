// A shard timed alone (bench --shard-alone): the SoloCommunicator exchanges nothing and counts what its rank sends,
// and a rank's LocalExecutor over it holds exactly what the same rank of a real group holds (its share, not the
// model) and makes the same collectives, call for call and byte for byte, as that rank in a group of threads.
#include <gtest/gtest.h>

#include <thread>

#include "collective/solo_communicator.h"
#include "collective/thread_group.h"
#include "engine/local_executor.h"
#include "support/test_paths.h"
#include "util/error.h"

namespace tessera {
namespace {

std::shared_ptr<collective::Communicator> borrow(collective::Communicator& c) {
  return std::shared_ptr<collective::Communicator>(&c, [](collective::Communicator*) {});
}

TEST(SoloCommunicator, ExchangesNothingAndCountsWhatItsRankSends) {
  collective::SoloCommunicator solo(1, 3, [](int peer, size_t mine) { return peer == 0 ? mine + 2 : mine; });
  EXPECT_EQ(solo.rank(), 1);
  EXPECT_EQ(solo.size(), 3);
  // An all-reduce keeps this rank's partial sums: nothing is added.
  std::vector<float> sums = {1.5f, -2.0f, 3.25f};
  solo.all_reduce_sum(sums);
  EXPECT_EQ(sums, (std::vector<float>{1.5f, -2.0f, 3.25f}));
  // A broadcast from rank 0 leaves the operation as it is; rank 1 receives it, so it sends nothing.
  std::vector<uint8_t> op = {7, 8, 9};
  solo.broadcast(op, 0);
  EXPECT_EQ(op, (std::vector<uint8_t>{7, 8, 9}));
  // A gather to another rank gives this one nothing; to itself, zeros where the others' parts would be.
  std::vector<float> all = {42.0f};
  solo.gather(std::vector<float>{4.0f, 5.0f}, all, 0);
  EXPECT_TRUE(all.empty());
  collective::SoloCommunicator root(0, 3, [](int peer, size_t mine) { return peer == 2 ? mine + 1 : mine; });
  root.gather(std::vector<float>{4.0f, 5.0f}, all, 0);
  EXPECT_EQ(all, (std::vector<float>{4.0f, 5.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f}));
  std::vector<uint8_t> gathered;
  solo.all_gather(std::vector<uint8_t>{1, 2}, gathered);
  EXPECT_EQ(gathered, (std::vector<uint8_t>{1, 2, 1, 2, 1, 2}));
  const collective::CollectiveStats st = solo.stats();
  EXPECT_EQ(st.calls, 4u);
  EXPECT_EQ(st.bytes, 3 * 4u + 0u + 2 * 4u + 2u);  // the sums, no broadcast bytes, the gather's floats, the bytes
  EXPECT_EQ(st.seconds, 0.0);
  std::vector<uint8_t> got;
  EXPECT_THROW(solo.send(op, 2), Error);
  EXPECT_THROW(solo.recv(got, 0), Error);
  EXPECT_THROW(collective::SoloCommunicator(3, 3), Error);
}

struct Layout {
  const char* model;
  bool tp, ep;
};

StageOptions options(const Layout& l, int rank, int n) {
  StageOptions o{1, 64, GgmlType::F32};
  if (n > 1) o.shard = ShardSpec{rank, n, {}, l.tp, l.ep, l.ep ? kDefaultEpRedundancy : 0.0};
  return o;
}

// What one rank held and sent: a prompt of 6 tokens with its logits gathered, then `steps` greedy steps sampled
// across the ranks, as bench drives an executor.
struct RankRun {
  uint64_t weights = 0;
  collective::CollectiveStats stats;
};

void drive(LocalExecutor& e, int steps) {
  Batch batch;
  for (int32_t i = 0; i < 6; ++i) batch.add(3 + 7 * i, 0, i, i == 5);
  std::vector<float> logits;
  e.decode(batch, logits);
  SamplerParams greedy;
  greedy.temperature = 0.0f;
  Sampler sampler(greedy, static_cast<int32_t>(e.config().n_vocab));
  std::vector<SampleRequest> requests = {{&sampler, -1}};
  std::vector<SampledToken> out;
  for (int32_t s = 0; s < steps; ++s) {
    batch.clear();
    batch.add(11 + s, 0, 6 + s, true);
    e.decode_sampled(batch, requests, out);
  }
}

std::vector<RankRun> group_run(const Layout& l, const std::shared_ptr<const ModelWeights>& w, int n, int steps) {
  collective::ThreadGroup group(n, std::chrono::seconds(20));
  std::vector<RankRun> runs(static_cast<size_t>(n));
  std::vector<std::thread> followers;
  for (int r = 1; r < n; ++r) {
    followers.emplace_back([&, r] {
      LocalExecutor e(w, options(l, r, n), 1, false, borrow(group.rank(r)));
      runs[static_cast<size_t>(r)].weights = e.stage().copied_bytes();
      e.follow();
    });
  }
  {
    LocalExecutor e(w, options(l, 0, n), 1, false, borrow(group.rank(0)));
    runs[0].weights = e.stage().copied_bytes();
    drive(e, steps);
  }
  for (auto& t : followers) t.join();
  for (int r = 0; r < n; ++r) runs[static_cast<size_t>(r)].stats = group.rank(r).stats();
  return runs;
}

RankRun solo_run(const Layout& l, const std::shared_ptr<const ModelWeights>& w, int rank, int n, int steps) {
  const auto vocab = [&](int r) {
    ShardSpec s = options(l, r, n).shard;
    const auto [v0, v1] = share_range(w->config().n_vocab, s, "the vocabulary");
    return static_cast<size_t>(v1 - v0);
  };
  auto solo = std::make_shared<collective::SoloCommunicator>(
      rank, n, [&](int peer, size_t mine) { return mine / vocab(rank) * vocab(peer); });
  RankRun run;
  {
    LocalExecutor e(w, options(l, rank, n), 1, false, solo);
    run.weights = e.stage().copied_bytes();
    drive(e, steps);
  }
  run.stats = solo->stats();
  return run;
}

TEST(SoloShard, HoldsItsRanksShareAndMakesTheGroupsCollectives) {
  // llama-f32 under --tp 3 cuts its 4 query heads 1/2/1 (fewer KV heads than ranks): an uneven share; the MoE
  // fixture under --ep 3 and --tp 3 --ep 3 (8 experts: 3/2/3, with copies).
  for (const Layout& l : {Layout{"llama-f32", true, false}, Layout{"qwen3moe-q4_k_m", false, true},
                          Layout{"qwen3moe-q4_k_m", true, true}}) {
    SCOPED_TRACE(l.model + std::string(l.tp ? " --tp 3" : "") + (l.ep ? " --ep 3" : ""));
    const auto w = ModelWeights::load(test::shared_dir() / "fixtures/models" / (std::string(l.model) + ".gguf"));
    const int n = 3, steps = 4;
    const uint64_t whole = LocalExecutor(w, options(l, 0, 1), 1).stage().copied_bytes();
    const std::vector<RankRun> group = group_run(l, w, n, steps);
    uint64_t sum = 0;
    for (int r = 0; r < n; ++r) {
      SCOPED_TRACE("rank " + std::to_string(r));
      const RankRun alone = solo_run(l, w, r, n, steps);
      const RankRun& want = group[static_cast<size_t>(r)];
      // Its share, as that rank of the group loads it, and never the whole model.
      EXPECT_EQ(alone.weights, want.weights);
      EXPECT_LT(alone.weights, whole);
      // The same collectives, call for call and byte for byte (a prompt, then greedy steps sampled apart).
      // (A follower of the group also receives the Stop that rank 0 sends as its executor ends: one call, no bytes.)
      EXPECT_EQ(alone.stats.calls + (r == 0 ? 0 : 1), want.stats.calls);
      EXPECT_EQ(alone.stats.bytes, want.stats.bytes);
      EXPECT_GT(alone.stats.calls, static_cast<uint64_t>(steps));
      sum += alone.weights;
    }
    // The shares cover the model once, plus what every rank holds whole (norms, embedding, router): more than the
    // model, less than three copies of it.
    EXPECT_GT(sum, whole);
    EXPECT_LT(sum, 3 * whole);
    if (l.tp && !l.ep) {
      // 1/2/1 query heads: rank 1 holds more than ranks 0 and 2, which hold alike.
      EXPECT_GT(group[1].weights, group[0].weights);
      EXPECT_EQ(group[0].weights, group[2].weights);
    }
  }
}

}  // namespace
}  // namespace tessera
