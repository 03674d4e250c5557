// Choosing prompt micro-batches from the stages' measured batch times: the interpolation, the flow-shop
// prediction, and which cut wins for costs of known shape.
#include <gtest/gtest.h>

#include <vector>

#include "cluster/micro_batches.h"
#include "cluster/pipeline_executor.h"
#include "util/error.h"

namespace tessera {
namespace {

// A stage's times at the measured sizes for a cost per pass of fixed + per_token x tokens.
std::vector<BatchTime> affine(double fixed, double per_token, std::vector<int64_t> sizes = {16, 32, 64, 128}) {
  std::vector<BatchTime> out;
  for (int64_t m : sizes) out.push_back({m, fixed + per_token * static_cast<double>(m)});
  return out;
}

TEST(MicroBatches, BatchSecondsInterpolatesBetweenSizesAndScalesOutside) {
  const std::vector<BatchTime> t = {{16, 1.0}, {32, 1.5}, {64, 2.0}};
  EXPECT_DOUBLE_EQ(cluster::batch_seconds(t, 16), 1.0);
  EXPECT_DOUBLE_EQ(cluster::batch_seconds(t, 24), 1.25);
  EXPECT_DOUBLE_EQ(cluster::batch_seconds(t, 48), 1.75);
  EXPECT_DOUBLE_EQ(cluster::batch_seconds(t, 8), 0.5);    // the smallest size's cost per token
  EXPECT_DOUBLE_EQ(cluster::batch_seconds(t, 128), 4.0);  // the largest size's cost per token
  EXPECT_THROW(cluster::batch_seconds({}, 16), Error);
}

TEST(MicroBatches, PredictedPrefillIsTheFlowShopMakespan) {
  // Two equal stages at 1 s per token: the first chunk crosses both, the others follow on the second stage.
  const std::vector<std::vector<BatchTime>> equal = {affine(0, 1), affine(0, 1)};
  const std::vector<int64_t> four = {32, 32, 32, 32};
  EXPECT_DOUBLE_EQ(cluster::predicted_prefill_seconds(four, equal), 32.0 + 4 * 32.0);
  // A slower second stage sets the pace: 2 s per token there.
  const std::vector<std::vector<BatchTime>> slow_second = {affine(0, 1), affine(0, 2)};
  EXPECT_DOUBLE_EQ(cluster::predicted_prefill_seconds(four, slow_second), 32.0 + 4 * 64.0);
  // A slower first stage: the second waits for each chunk, then takes 32 s more for the last.
  const std::vector<std::vector<BatchTime>> slow_first = {affine(0, 2), affine(0, 1)};
  EXPECT_DOUBLE_EQ(cluster::predicted_prefill_seconds(four, slow_first), 4 * 64.0 + 32.0);
  // Chunks of different sizes: stage 1 ends at 16, 48, 64; stage 2 at 32, 80, 96.
  const std::vector<int64_t> mixed = {16, 32, 16};
  EXPECT_DOUBLE_EQ(cluster::predicted_prefill_seconds(mixed, equal), 96.0);
}

TEST(MicroBatches, EquallyEfficientSizesGiveTheSmallestChunks) {
  // Every size costs the same per token. Over two equal stages the makespan is the whole prompt on one stage plus
  // the largest chunk on the other (the second stage trails the first by that chunk from where it enters to the
  // end), so the smallest uniform chunks win: 512 + 16 ms, where halving the ends of 32-token chunks gives 512 + 32
  // and the rule's 32, 7 x 64, 32 gives 512 + 64.
  const std::vector<std::vector<BatchTime>> stages = {affine(0, 1e-3), affine(0, 1e-3)};
  const auto rule = cluster::PipelineExecutor::prompt_chunks(512, 2, 0);
  const auto cut = cluster::fastest_prompt_chunks(512, stages, rule);
  EXPECT_EQ(cut, std::vector<int64_t>(32, 16));
  EXPECT_NEAR(cluster::predicted_prefill_seconds(cut, stages), 0.528, 1e-9);
  EXPECT_NEAR(cluster::predicted_prefill_seconds(rule, stages), 0.576, 1e-9);
}

TEST(MicroBatches, AFixedCostPerPassGivesLargeChunks) {
  // 100 ms per pass besides 1 ms per token: 4 x 128 (1.14 s predicted) beats the rule's 9 chunks (1.54 s).
  const std::vector<std::vector<BatchTime>> stages = {affine(0.1, 1e-3), affine(0.1, 1e-3)};
  const auto rule = cluster::PipelineExecutor::prompt_chunks(512, 2, 0);
  const auto cut = cluster::fastest_prompt_chunks(512, stages, rule);
  EXPECT_EQ(cut, (std::vector<int64_t>{128, 128, 128, 128}));
  EXPECT_LT(cluster::predicted_prefill_seconds(cut, stages), 0.8 * cluster::predicted_prefill_seconds(rule, stages));
}

TEST(MicroBatches, SlowSmallBatchesAreAvoided) {
  // 16 tokens cost as much as 32 (a kernel whose tiles want more tokens): no 16-token chunk is chosen.
  std::vector<BatchTime> t = affine(0, 1e-3);
  t[0].seconds = t[1].seconds;
  const std::vector<std::vector<BatchTime>> stages = {t, t};
  const auto cut = cluster::fastest_prompt_chunks(512, stages, cluster::PipelineExecutor::prompt_chunks(512, 2, 0));
  for (int64_t m : cut) EXPECT_GE(m, 32);
  int64_t total = 0;
  for (int64_t m : cut) total += m;
  EXPECT_EQ(total, 512);
}

TEST(MicroBatches, WithoutTimesTheRuleStands) {
  const auto rule = cluster::PipelineExecutor::prompt_chunks(512, 2, 0);
  const std::vector<std::vector<BatchTime>> missing = {affine(0, 1e-3), {}};
  EXPECT_EQ(cluster::fastest_prompt_chunks(512, missing, rule), rule);
  // A prompt no longer than the smallest measured size stays one chunk (the rule's).
  const std::vector<std::vector<BatchTime>> stages = {affine(0, 1e-3), affine(0, 1e-3)};
  EXPECT_EQ(cluster::fastest_prompt_chunks(10, stages, cluster::PipelineExecutor::prompt_chunks(10, 2, 0)),
            (std::vector<int64_t>{10}));
}

TEST(MicroBatches, CutPrompt) {
  EXPECT_EQ(cluster::cut_prompt(200, 48, 0), (std::vector<int64_t>{48, 48, 48, 48, 8}));
  EXPECT_EQ(cluster::cut_prompt(160, 64, 16), (std::vector<int64_t>{16, 64, 64, 16}));
  EXPECT_EQ(cluster::cut_prompt(10, 64, 0), (std::vector<int64_t>{10}));
}

TEST(MicroBatches, Descriptions) {
  EXPECT_EQ(cluster::describe_chunks(std::vector<int64_t>{32, 64, 64, 64, 32}), "32, 3 x 64, 32");
  EXPECT_EQ(cluster::describe_chunks(std::vector<int64_t>{16}), "16");
  EXPECT_EQ(cluster::describe_batch_times(std::vector<BatchTime>{{16, 0.1}, {32, 0.1}}), "16: 160, 32: 320");
  EXPECT_EQ(cluster::describe_batch_times({}), "-");
}

}  // namespace
}  // namespace tessera
