// The planner counts the collectives a tensor/expert-parallel group makes per decoded token as the runtime makes
// them: a rank's LocalExecutor over a SoloCommunicator (what bench --shard-alone times) counts its calls and bytes,
// and the planner's group pass for the same model and layout must have as many calls and about as many bytes.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "collective/solo_communicator.h"
#include "engine/local_executor.h"
#include "gguf/gguf_file.h"
#include "plan/cost_model.h"
#include "support/plan_fixtures.h"
#include "support/test_paths.h"

namespace tessera {
namespace {

struct Layout {
  const char* model;
  bool tp, ep;
  plan::ParallelMode mode;
};

struct PerStep {
  double calls = 0, bytes = 0;
};

// Rank 0 of `n` alone: a prompt of 6 tokens, then `steps` single-token steps sampled across the ranks with
// `params`, as bench and generation drive an executor; the collectives of the steps, per step.
PerStep measured(const Layout& l, const SamplerParams& params, int n, int steps) {
  const auto w = ModelWeights::load(test::shared_dir() / "fixtures/models" / (std::string(l.model) + ".gguf"));
  StageOptions o{1, 64, GgmlType::F32};
  o.shard = ShardSpec{0, n, {}, l.tp, l.ep, l.ep ? kDefaultEpRedundancy : 0.0};
  const auto vocab = [&](int r) {
    ShardSpec s = o.shard;
    s.rank = r;
    const auto [v0, v1] = share_range(w->config().n_vocab, s, "the vocabulary");
    return static_cast<size_t>(v1 - v0);
  };
  auto solo = std::make_shared<collective::SoloCommunicator>(
      0, n, [&](int peer, size_t mine) { return mine / vocab(0) * vocab(peer); });
  LocalExecutor e(w, o, 1, false, solo);
  Batch batch;
  for (int32_t i = 0; i < 6; ++i) batch.add(3 + 7 * i, 0, i, i == 5);
  std::vector<float> logits;
  e.decode(batch, logits);
  Sampler sampler(params, static_cast<int32_t>(e.config().n_vocab));
  std::vector<SampleRequest> requests = {{&sampler, -1}};
  std::vector<SampledToken> out;
  const collective::CollectiveStats before = solo->stats();
  for (int32_t s = 0; s < steps; ++s) {
    batch.clear();
    batch.add(11 + s, 0, 6 + s, true);
    e.decode_sampled(batch, requests, out);
  }
  const collective::CollectiveStats after = solo->stats();
  return {static_cast<double>(after.calls - before.calls) / steps,
          static_cast<double>(after.bytes - before.bytes) / steps};
}

// The planner's decode step of the whole model as one group stage over `n` nodes: its calls, and the bytes rank 0
// sends (each all-reduce's buffer, the broadcast's message, its part of each all-gather).
PerStep planned(const Layout& l, const SamplerParams& params, int n) {
  const auto path = test::shared_dir() / "fixtures/models" / (std::string(l.model) + ".gguf");
  const auto file = gguf::GgufFile::open(path);
  const ModelConfig config = ModelConfig::from_gguf(file);
  const plan::ModelCost m = plan::model_cost_from_file(file, config, GgmlType::F32, l.model);
  std::vector<plan::NodeProfile> nodes;
  for (int r = 0; r < n; ++r) nodes.push_back(test::plan_vm(fmt::format("n{}", r)));
  const plan::Cluster c(std::move(nodes), "n0", {}, plan::LinkProfile{"*", "*", 1e-3, 10, "test"});
  const plan::CostModel cm(m, c, plan::PlanConstants{}, params);
  std::vector<size_t> ids;
  for (int r = 0; r < n; ++r) ids.push_back(static_cast<size_t>(r));
  const plan::StageSpec s{0, 0, config.n_layer - 1, true, true, cm.make_group(ids, l.mode)};
  const plan::GroupPass pass = cm.group_pass(s, 1, 1, 8, 1);
  PerStep p{static_cast<double>(pass.all_reduces + pass.other_collectives), pass.all_reduces * pass.all_reduce_bytes};
  for (const plan::SmallCollective& sc : pass.small) p.bytes += sc.count * sc.bytes;
  return p;
}

TEST(PlanCollectives, CountedAsTheRuntimeMakesThem) {
  SamplerParams greedy;
  greedy.temperature = 0.0f;
  for (const Layout& l : {Layout{"llama-f32", true, false, plan::ParallelMode::Tensor},
                          Layout{"qwen3moe-q4_k_m", false, true, plan::ParallelMode::Expert},
                          Layout{"qwen3moe-q4_k_m", true, true, plan::ParallelMode::TensorExpert}}) {
    // Greedy (bench's) and the CLI's default sampler (top-k 40): one broadcast of the step, one all-gather.
    for (const SamplerParams& params : {greedy, SamplerParams{}}) {
      SCOPED_TRACE(fmt::format("{}{}{}, {}", l.model, l.tp ? " --tp 3" : "", l.ep ? " --ep 3" : "",
                               params.greedy() ? "greedy" : "top-k 40"));
      const PerStep run = measured(l, params, 3, 3);
      const PerStep plan = planned(l, params, 3);
      EXPECT_EQ(plan.calls, run.calls);
      EXPECT_GT(run.calls, 2.0);  // the all-reduces were counted too
      // The bytes too: the all-reduces' buffers, the step's message (PlanConstants::sample_spec_bytes), the candidates.
      EXPECT_NEAR(plan.bytes, run.bytes, 8.0);
    }
  }
}

}  // namespace
}  // namespace tessera
