// PipelineExecutor over in-process stages: the same logits as one Stage with every layer, for prompts cut into
// micro-batches, mixed-sequence batches and greedy decoding; bad splits and bad batches are clear errors.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "cluster/local_stage_endpoint.h"
#include "cluster/micro_batches.h"
#include "cluster/pipeline_executor.h"
#include "engine/local_executor.h"
#include "support/test_paths.h"
#include "util/error.h"

namespace tessera {
namespace {

std::unique_ptr<cluster::PipelineExecutor> make_pipeline(const std::filesystem::path& model,
                                                         const std::vector<LayerRange>& ranges, StageOptions so,
                                                         int64_t micro_batch = 0) {
  auto full = ModelWeights::load(model);
  auto p = std::make_unique<cluster::PipelineExecutor>(full->config(), so.n_ctx, so.n_slots,
                                                       cluster::PipelineOptions{micro_batch});
  for (size_t i = 0; i < ranges.size(); ++i) {
    const bool first = i == 0;
    const bool last = i + 1 == ranges.size();
    auto w = ModelWeights::load(model, ranges[i], first, last);
    p->add_stage(std::make_unique<cluster::LocalStageEndpoint>(fmt::format("s{}", i), static_cast<int>(i), w, so, 1,
                                                               p->completions()));
  }
  p->check_complete();
  return p;
}

Batch prompt_batch(const std::vector<int32_t>& tokens, int32_t seq, bool all_logits) {
  Batch b;
  for (size_t i = 0; i < tokens.size(); ++i) {
    b.add(tokens[i], seq, static_cast<int32_t>(i), all_logits || i + 1 == tokens.size());
  }
  return b;
}

TEST(Pipeline, SameLogitsAsOneStageForEveryArchitecture) {
  const std::vector<int32_t> prompt = {1, 403, 407, 261, 378, 383, 286, 261, 376, 298, 315, 421, 395, 317};
  for (const char* name : {"llama-q8_0", "qwen2-f32", "qwen3moe-q4_k_m", "mixtral-q4_k_m"}) {
    const auto path = test::shared_dir() / "fixtures/models" / (std::string(name) + ".gguf");
    StageOptions so{1, 64, GgmlType::F32};
    LocalExecutor one(ModelWeights::load(path), so, 1);
    auto two = make_pipeline(path, {{0, 1}, {1, 2}}, so, 4);  // 4-token micro-batches: 4 in flight
    std::vector<float> a, b;
    one.decode(prompt_batch(prompt, 0, true), a);
    two->decode(prompt_batch(prompt, 0, true), b);
    // Micro-batches of 4 tokens meet differently tiled SIMD kernels than one batch of 14: equal up to rounding.
    ASSERT_EQ(a.size(), b.size());
    float max_diff = 0.0f;
    for (size_t i = 0; i < a.size(); ++i) max_diff = std::max(max_diff, std::fabs(a[i] - b[i]));
    EXPECT_LE(max_diff, 1e-3f) << name;
    EXPECT_EQ(two->sequence_length(0), static_cast<int64_t>(prompt.size()));
  }
}

// Gemma: a stage boundary anywhere, including between a layer that reuses another's K/V and that layer (gemma4:
// layers 3 and 4 read layers 1 and 2), with the per-layer inputs and the reused K/V rows carried across; prompts cut
// into micro-batches of 4 and 5 and sliding-window rings that wrap inside them; then greedy steps.
TEST(Pipeline, GemmaSameLogitsAsOneStageWithABoundaryAnywhere) {
  const std::vector<int32_t> prompt = {1, 403, 407, 261, 378, 383, 286, 261, 376, 298, 315, 421, 395, 317};
  struct Split {
    const char* model;
    std::vector<LayerRange> ranges;
  };
  const std::vector<Split> splits = {
      {"gemma4-f32", {{0, 1}, {1, 5}}},         {"gemma4-f32", {{0, 2}, {2, 5}}},
      {"gemma4-f32", {{0, 3}, {3, 5}}},         {"gemma4-f32", {{0, 4}, {4, 5}}},
      {"gemma4-f32", {{0, 2}, {2, 3}, {3, 5}}}, {"gemma4-q8_0", {{0, 2}, {2, 4}, {4, 5}}},
      {"gemma3-f32", {{0, 3}, {3, 6}}},         {"gemma4moe-q4_k_m", {{0, 1}, {1, 4}}},
  };
  for (const auto& [name, ranges] : splits) {
    SCOPED_TRACE(fmt::format("{} over {} stages from layer {}", name, ranges.size(), ranges[1].begin));
    const auto path = test::shared_dir() / "fixtures/models" / (std::string(name) + ".gguf");
    for (int64_t micro : {4, 5}) {
      StageOptions so{1, 64, GgmlType::F32};
      so.window_batch = 3;  // rings of 10 cells for the window of 8
      LocalExecutor one(ModelWeights::load(path), so, 1);
      auto many = make_pipeline(path, ranges, so, micro);
      std::vector<float> a, b;
      one.decode(prompt_batch(prompt, 0, true), a);
      many->decode(prompt_batch(prompt, 0, true), b);
      ASSERT_EQ(a.size(), b.size());
      float max_diff = 0.0f;
      for (size_t i = 0; i < a.size(); ++i) max_diff = std::max(max_diff, std::fabs(a[i] - b[i]));
      EXPECT_LE(max_diff, 1e-3f);
      const int64_t v = one.config().n_vocab;
      for (int32_t step = 0; step < 6; ++step) {
        const float* last = a.data() + (a.size() / static_cast<size_t>(v) - 1) * static_cast<size_t>(v);
        const auto next = static_cast<int32_t>(std::max_element(last, last + v) - last);
        Batch d;
        d.add(next, 0, static_cast<int32_t>(prompt.size()) + step, true);
        one.decode(d, a);
        many->decode(d, b);
        max_diff = 0.0f;
        for (size_t i = 0; i < a.size(); ++i) max_diff = std::max(max_diff, std::fabs(a[i] - b[i]));
        EXPECT_LE(max_diff, 1e-3f) << "step " << step;
      }
    }
  }
}

std::vector<int64_t> chunk_sizes(const cluster::PipelineExecutor& p, int32_t n) {
  Batch b;
  for (int32_t i = 0; i < n; ++i) b.add(1, 0, i, i + 1 == n);
  std::vector<int64_t> out;
  int32_t next = 0;
  for (const Batch& part : p.split(b)) {
    out.push_back(part.size());
    for (int32_t pos : part.pos) EXPECT_EQ(pos, next++);
  }
  EXPECT_EQ(next, n);
  return out;
}

// The automatic rule (what the planner predicts, and the cut where a stage has no measured times) gives each stage
// about four chunks, with the first and the last halved when they stay at 16 tokens or more; the user's
// --micro-batch cuts evenly.
TEST(Pipeline, PromptChunksHalveTheFirstAndLast) {
  EXPECT_EQ(cluster::PipelineExecutor::prompt_chunks(512, 2, 0),
            (std::vector<int64_t>{32, 64, 64, 64, 64, 64, 64, 64, 32}));
  EXPECT_EQ(cluster::PipelineExecutor::prompt_chunks(500, 2, 0),
            (std::vector<int64_t>{31, 63, 63, 63, 63, 63, 63, 60, 31}));
  EXPECT_EQ(cluster::PipelineExecutor::prompt_chunks(100, 2, 0),
            (std::vector<int64_t>{16, 16, 16, 16, 16, 16, 4}));  // halves would be under 16
  EXPECT_EQ(cluster::PipelineExecutor::prompt_chunks(384, 3, 0),
            (std::vector<int64_t>{16, 32, 32, 32, 32, 32, 32, 32, 32, 32, 32, 32, 16}));
  const auto path = test::shared_dir() / "models/stories260K.gguf";
  const auto fixed = make_pipeline(path, {{0, 2}, {2, 5}}, {1, 512, GgmlType::F16}, 48);
  EXPECT_EQ(chunk_sizes(*fixed, 200), (std::vector<int64_t>{48, 48, 48, 48, 8}));
}

// Without --micro-batch a prompt is cut as the stages' batch times, measured when they were loaded, predict to be
// fastest.
TEST(Pipeline, AutomaticChunksFollowTheStagesMeasuredTimes) {
  const auto path = test::shared_dir() / "models/stories260K.gguf";
  const auto two = make_pipeline(path, {{0, 2}, {2, 5}}, {1, 512, GgmlType::F16});
  std::vector<std::vector<BatchTime>> times;
  for (size_t i = 0; i < two->n_stages(); ++i) {
    const auto& t = two->stage(i).batch_times();
    ASSERT_EQ(t.size(), std::size(cluster::kTimedBatchTokens));
    for (size_t j = 0; j < t.size(); ++j) {
      EXPECT_EQ(t[j].tokens, cluster::kTimedBatchTokens[j]);
      EXPECT_GT(t[j].seconds, 0.0);
    }
    times.push_back(t);
  }
  for (int32_t n : {512, 300, 100, 20}) {
    const auto want = cluster::fastest_prompt_chunks(n, times, cluster::PipelineExecutor::prompt_chunks(n, 2, 0));
    EXPECT_EQ(two->prompt_cut(n), want) << n;
    EXPECT_EQ(chunk_sizes(*two, n), want) << n;
  }
  // A context shorter than some sizes: those are not measured.
  const auto short_ctx = make_pipeline(path, {{0, 2}, {2, 5}}, {1, 40, GgmlType::F16});
  const auto& t = short_ctx->stage(0).batch_times();
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[1].tokens, 32);
}

TEST(Pipeline, Stories260KGreedyOverThreeStages) {
  std::ifstream in(test::shared_dir() / "models/reference/stories260K.greedy.json");
  const auto ref = nlohmann::json::parse(in);
  const auto expected = ref["generated_tokens"].get<std::vector<int32_t>>();
  auto p =
      make_pipeline(test::shared_dir() / "models/stories260K.gguf", {{0, 2}, {2, 4}, {4, 5}}, {1, 256, GgmlType::F16});
  std::vector<float> logits;
  int32_t token = 1;
  std::vector<int32_t> got;
  for (int32_t pos = 0; pos < 200; ++pos) {
    Batch b;
    b.add(token, 0, pos, true);
    p->decode(b, logits);
    token = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    got.push_back(token);
  }
  EXPECT_EQ(got, expected);
}

// The one node evaluates the 12 tokens as one batch and the 4-token step whole, the pipeline as two groups of 6 and
// of 2: the SIMD paths choose kernels by batch size (AVX2's Q8_0 rows switch from per-row dots to the small-batch
// gemm at 4 tokens), which sums the same int32 block products in another float order. The scalar path computes
// every token alike, so the logits must be bit-identical there.
TEST(Pipeline, MixedSequencesSplitIntoGroupsAndKeepOrder) {
  struct ScalarIsa {
    std::optional<std::string> before;
    ScalarIsa() {
      if (const char* v = std::getenv("TESSERA_ISA")) before = v;
      setenv("TESSERA_ISA", "scalar", 1);
    }
    ~ScalarIsa() {
      if (before) {
        setenv("TESSERA_ISA", before->c_str(), 1);
      } else {
        unsetenv("TESSERA_ISA");
      }
    }
  } scalar;
  const auto path = test::shared_dir() / "fixtures/models/qwen3-q8_0.gguf";
  StageOptions so{4, 32, GgmlType::F16};
  LocalExecutor one(ModelWeights::load(path), so, 1);
  auto p = make_pipeline(path, {{0, 1}, {1, 2}}, so);
  Batch b;  // four sequences, interleaved, several tokens each
  for (int32_t pos = 0; pos < 3; ++pos) {
    for (int32_t s = 0; s < 4; ++s) b.add(10 + 7 * s + pos, s, pos, true);
  }
  EXPECT_EQ(p->split(b).size(), 2u);
  std::vector<float> x, y;
  one.decode(b, x);
  p->decode(b, y);
  EXPECT_EQ(x, y);
  // Decode step: one token per sequence.
  Batch step;
  for (int32_t s = 0; s < 4; ++s) step.add(42, s, 3, true);
  one.decode(step, x);
  p->decode(step, y);
  EXPECT_EQ(x, y);
  p->clear_sequence(2);
  EXPECT_EQ(p->sequence_length(2), 0);
  EXPECT_EQ(p->sequence_length(1), 4);
}

TEST(Pipeline, GapsAndBadBatchesAreClearErrors) {
  const auto path = test::shared_dir() / "models/stories260K.gguf";
  try {
    make_pipeline(path, {{0, 2}, {3, 5}}, {1, 16, GgmlType::F16});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("starts at layer 3, expected layer 2"), std::string::npos) << e.what();
  }
  auto p = make_pipeline(path, {{0, 3}, {3, 5}}, {1, 8, GgmlType::F16});
  std::vector<float> logits;
  Batch b;
  b.add(1, 0, 5, true);
  try {
    p->decode(b, logits);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("expected position 0"), std::string::npos) << e.what();
  }
  Batch too_long = prompt_batch(std::vector<int32_t>(9, 1), 0, false);
  EXPECT_THROW(p->decode(too_long, logits), Error);
  EXPECT_EQ(p->sequence_length(0), 0);
}

}  // namespace
}  // namespace tessera
