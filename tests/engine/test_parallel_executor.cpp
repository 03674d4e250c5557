// LocalExecutor under tensor parallelism with ranks as threads: rank 0's executor sends each operation, the other
// ranks follow; every rank samples from its own vocabulary range (ShardedSampler), and the picks equal one node's for
// the same seed, and equal those of the same ranks gathering the rows (logprobs included, bit for bit).
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

struct Outcome {
  std::vector<SampledToken> picks;
  uint64_t rank0_bytes = 0;  // what rank 0 put into collectives
};

// Picks for a prompt and `steps` one-token steps with a sampler of these params, on n ranks (1: one node); `gather`:
// the rows gathered on rank 0 and sampled there (the Executor's default) instead of apart.
Outcome picks(const std::string& model, int n, SamplerParams params, int steps, int32_t top_logprobs = -1,
              bool gather = false) {
  auto weights = ModelWeights::load(test::shared_dir() / "fixtures/models" / (model + ".gguf"));
  collective::ThreadGroup group(n, std::chrono::seconds(20));
  Outcome run;
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
    SamplerParams pb = params;
    pb.seed = params.seed + 1;
    Sampler a(params, static_cast<int32_t>(weights->config().n_vocab));
    Sampler b(pb, static_cast<int32_t>(weights->config().n_vocab));
    // Two sequences in one batch: each output row is picked on its own.
    Batch batch;
    const std::vector<int32_t> prompt = {1, 403, 407, 261, 378, 383, 286};
    for (size_t i = 0; i < prompt.size(); ++i) batch.add(prompt[i], 0, static_cast<int32_t>(i), i + 1 == prompt.size());
    for (size_t i = 0; i < 3; ++i) batch.add(prompt[i + 2], 1, static_cast<int32_t>(i), i == 2);
    for (int32_t t : prompt) a.accept(t);
    std::vector<SampleRequest> requests = {{&a, top_logprobs}, {&b, top_logprobs}};
    std::vector<SampledToken> got;
    int32_t pos0 = static_cast<int32_t>(prompt.size()), pos1 = 3;
    for (int s = 0; s <= steps; ++s) {
      if (gather) {
        e.Executor::decode_sampled(batch, requests, got);
      } else {
        e.decode_sampled(batch, requests, got);
      }
      run.picks.push_back(got.at(0));
      run.picks.push_back(got.at(1));
      a.accept(got[0].token);
      b.accept(got[1].token);
      batch.clear();
      batch.add(got[0].token, 0, pos0++, true);
      batch.add(got[1].token, 1, pos1++, true);
    }
  }
  for (auto& t : followers) t.join();
  run.rank0_bytes = group.rank(0).stats().bytes;
  return run;
}

std::vector<int32_t> tokens(const Outcome& run) {
  std::vector<int32_t> out;
  for (const SampledToken& t : run.picks) out.push_back(t.token);
  return out;
}

void expect_same(const Outcome& got, const Outcome& want, const std::string& what) {
  ASSERT_EQ(got.picks.size(), want.picks.size()) << what;
  for (size_t i = 0; i < want.picks.size(); ++i) {
    ASSERT_EQ(got.picks[i].token, want.picks[i].token) << what << " pick " << i;
    EXPECT_EQ(got.picks[i].logprob, want.picks[i].logprob) << what << " pick " << i;
    ASSERT_EQ(got.picks[i].top.size(), want.picks[i].top.size()) << what;
    for (size_t k = 0; k < want.picks[i].top.size(); ++k) {
      EXPECT_EQ(got.picks[i].top[k].token, want.picks[i].top[k].token) << what << " pick " << i;
      EXPECT_EQ(got.picks[i].top[k].logprob, want.picks[i].top[k].logprob) << what << " pick " << i;
    }
  }
}

TEST(ParallelExecutor, GreedyPicksFromEachRanksBestEqualOneNode) {
  SamplerParams greedy;
  greedy.temperature = 0.0f;
  for (const char* model : {"qwen3-f32", "gemma4-f32", "qwen3moe-q4_k_m"}) {
    const auto one = tokens(picks(model, 1, greedy, 10));
    const Outcome apart = picks(model, 2, greedy, 10);
    EXPECT_EQ(tokens(apart), one) << model;
    EXPECT_EQ(tokens(picks(model, 3, greedy, 10)), one) << model;
    // Rank 0 sent its all-reduce shares and a best token per row, not its 128 of the 256 logits per row (11 steps x
    // 2 rows), which the gathering run sends.
    const Outcome gathered = picks(model, 2, greedy, 10, -1, true);
    EXPECT_EQ(tokens(gathered), one) << model;
    EXPECT_LT(apart.rank0_bytes + 11 * 2 * 100 * 4, gathered.rank0_bytes)
        << model << ": greedy picks gathered the rows";
  }
}

SamplerParams sampling(float temperature, int32_t top_k, float top_p, float min_p, uint64_t seed) {
  SamplerParams p;
  p.temperature = temperature;
  p.top_k = top_k;
  p.top_p = top_p;
  p.min_p = min_p;
  p.seed = seed;
  return p;
}

// Every kind of pick: top-k merged from the ranks' candidates, top-p and min-p cut exactly over the ranks, draws
// walked rank by rank, penalties applied by each rank to its own range, logprobs from the ranks' sums.
TEST(ParallelExecutor, SampledPicksEqualOneNodeForASeed) {
  SamplerParams penalised = sampling(0.9f, 40, 0.95f, 0.05f, 1234);
  penalised.repeat_penalty = 1.3f;
  penalised.frequency_penalty = 0.3f;
  penalised.presence_penalty = 0.2f;
  SamplerParams penalised_greedy = penalised;
  penalised_greedy.temperature = 0.0f;
  SamplerParams penalised_top_p = penalised;
  penalised_top_p.top_k = 0;
  const struct {
    const char* name;
    SamplerParams params;
    int32_t top_logprobs;
  } cases[] = {
      {"defaults", sampling(0.8f, 40, 0.95f, 0.05f, 7), -1},
      {"temperature", sampling(1.2f, 0, 1.0f, 0.0f, 8), -1},
      {"top_k", sampling(1.0f, 5, 1.0f, 0.0f, 9), 3},
      {"top_p", sampling(0.8f, 0, 0.9f, 0.0f, 10), -1},
      {"top_p_min_p", sampling(1.0f, 0, 0.7f, 0.1f, 11), 2},
      {"min_p", sampling(0.7f, 0, 1.0f, 0.05f, 12), 0},
      {"penalties", penalised, -1},
      {"penalties_greedy", penalised_greedy, 4},
      {"penalties_top_p", penalised_top_p, -1},
  };
  for (const char* model : {"llama-f32", "qwen3-f32"}) {
    for (const auto& c : cases) {
      const std::string what = std::string(model) + " " + c.name;
      const auto one = tokens(picks(model, 1, c.params, 12, c.top_logprobs));
      for (int n : {2, 3}) {
        const Outcome apart = picks(model, n, c.params, 12, c.top_logprobs);
        EXPECT_EQ(tokens(apart), one) << what << " on " << n << " ranks";
        // The same ranks gathering the rows see the very same logits: everything equal to the bit.
        expect_same(apart, picks(model, n, c.params, 12, c.top_logprobs, true), what + " gathered");
      }
    }
  }
}

}  // namespace
}  // namespace tessera
