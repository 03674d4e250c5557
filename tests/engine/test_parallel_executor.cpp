// LocalExecutor under tensor parallelism with ranks as threads: rank 0's executor sends each operation, the other
// ranks follow; greedy picks made from each rank's best token equal one node's, and sampled picks (which gather the
// rows) equal one node's for the same seed.
#include <gtest/gtest.h>

#include <thread>

#include "collective/thread_group.h"
#include "engine/local_executor.h"
#include "support/test_paths.h"

namespace tessera {
namespace {

std::shared_ptr<collective::Communicator> borrow(collective::Communicator& c) {
  return std::shared_ptr<collective::Communicator>(&c, [](collective::Communicator*) {});
}

// Picks for a prompt and `steps` one-token steps with a sampler of these params, on n ranks (1: one node).
std::vector<int32_t> picks(const std::string& model, int n, SamplerParams params, int steps,
                           uint64_t* rank0_bytes = nullptr) {
  auto weights = ModelWeights::load(test::shared_dir() / "fixtures/models" / (model + ".gguf"));
  collective::ThreadGroup group(n, std::chrono::seconds(20));
  std::vector<int32_t> out;
  std::vector<std::thread> followers;
  auto options = [&](int r) {
    StageOptions o{2, 64, GgmlType::F32};
    if (n > 1) o.shard = ShardSpec{r, n, {}, true, false};
    return o;
  };
  for (int r = 1; r < n; ++r) {
    followers.emplace_back([&, r] {
      LocalExecutor e(weights, options(r), 1, false, borrow(group.rank(r)));
      e.follow();
    });
  }
  {
    LocalExecutor e(weights, options(0), 1, false, n > 1 ? borrow(group.rank(0)) : nullptr);
    Sampler a(params, static_cast<int32_t>(weights->config().n_vocab));
    Sampler b(params, static_cast<int32_t>(weights->config().n_vocab));
    // Two sequences in one batch: each output row is picked on its own.
    Batch batch;
    const std::vector<int32_t> prompt = {1, 403, 407, 261, 378, 383, 286};
    for (size_t i = 0; i < prompt.size(); ++i) batch.add(prompt[i], 0, static_cast<int32_t>(i), i + 1 == prompt.size());
    for (size_t i = 0; i < 3; ++i) batch.add(prompt[i + 2], 1, static_cast<int32_t>(i), i == 2);
    std::vector<SampleRequest> requests = {{&a, -1}, {&b, -1}};
    std::vector<SampledToken> got;
    int32_t pos0 = static_cast<int32_t>(prompt.size()), pos1 = 3;
    for (int s = 0; s <= steps; ++s) {
      e.decode_sampled(batch, requests, got);
      out.push_back(got.at(0).token);
      out.push_back(got.at(1).token);
      a.accept(got[0].token);
      b.accept(got[1].token);
      batch.clear();
      batch.add(got[0].token, 0, pos0++, true);
      batch.add(got[1].token, 1, pos1++, true);
    }
  }
  for (auto& t : followers) t.join();
  if (rank0_bytes != nullptr) *rank0_bytes = group.rank(0).stats().bytes;
  return out;
}

TEST(ParallelExecutor, GreedyPicksFromEachRanksBestEqualOneNode) {
  SamplerParams greedy;
  greedy.temperature = 0.0f;
  for (const char* model : {"qwen3-f32", "gemma4-f32", "qwen3moe-q4_k_m"}) {
    const auto one = picks(model, 1, greedy, 10);
    uint64_t bytes = 0;
    EXPECT_EQ(picks(model, 2, greedy, 10, &bytes), one) << model;
    EXPECT_EQ(picks(model, 3, greedy, 10), one) << model;
    // Rank 0 sent its all-reduce shares and a best token per row, not its 256 logits per row (11 steps x 2 rows).
    uint64_t reduced = 0;
    SamplerParams sampled;
    sampled.seed = 7;
    picks(model, 2, sampled, 10, &reduced);
    EXPECT_LT(bytes + 11 * 2 * 200 * 4, reduced) << model << ": greedy picks gathered the rows";
  }
}

TEST(ParallelExecutor, SampledPicksEqualOneNodeForASeed) {
  SamplerParams p;
  p.temperature = 0.9f;
  p.seed = 1234;
  p.repeat_penalty = 1.1f;
  const auto one = picks("llama-f32", 1, p, 12);
  EXPECT_EQ(picks("llama-f32", 2, p, 12), one);
  // Greedy with a penalty reads the history: the rows are gathered, and the picks still equal one node's.
  SamplerParams penalised;
  penalised.temperature = 0.0f;
  penalised.repeat_penalty = 1.3f;
  EXPECT_EQ(picks("llama-f32", 3, penalised, 12), picks("llama-f32", 1, penalised, 12));
}

}  // namespace
}  // namespace tessera
