// Benchmark logic on the bundled stories260K: what each test evaluates (from an empty cache, batch sizes,
// positions, one token per generation step), repeat and result counts, the statistics, the roofline, list parsing.
// Nothing here depends on how fast the machine is.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <span>

#include "engine/benchmark.h"
#include "engine/local_executor.h"
#include "hw/probe.h"
#include "model/model_profile.h"
#include "support/test_paths.h"
#include "util/error.h"

namespace tessera {
namespace {

std::shared_ptr<const ModelWeights> stories() {
  return ModelWeights::load(test::source_dir() / "models/stories260K.gguf");
}

std::unique_ptr<LocalExecutor> executor(int threads = 1, int64_t n_ctx = 64) {
  StageOptions so;
  so.n_ctx = n_ctx;
  return std::make_unique<LocalExecutor>(stories(), so, threads);
}

// Passes batches to a real executor and records what the benchmark asked of it.
class RecordingExecutor : public Executor {
 public:
  explicit RecordingExecutor(std::unique_ptr<Executor> inner) : inner_(std::move(inner)) {}
  const ModelConfig& config() const override { return inner_->config(); }
  int64_t n_ctx() const override { return inner_->n_ctx(); }
  int64_t n_slots() const override { return inner_->n_slots(); }
  void decode(const Batch& batch, std::vector<float>& logits) override {
    batch_sizes.push_back(batch.size());
    length_before.push_back(inner_->sequence_length(0));
    first_pos.push_back(batch.pos.front());
    outputs.push_back(batch.n_outputs());
    for (auto t : batch.tokens) {
      EXPECT_GE(t, 0);
      EXPECT_LT(t, config().n_vocab);
    }
    inner_->decode(batch, logits);
  }
  void clear_sequence(int64_t seq) override {
    ++clears;
    inner_->clear_sequence(seq);
  }
  void truncate_sequence(int64_t seq, int64_t n) override { inner_->truncate_sequence(seq, n); }
  int64_t sequence_length(int64_t seq) const override { return inner_->sequence_length(seq); }

  std::vector<int64_t> batch_sizes, length_before, first_pos, outputs;
  int clears = 0;

 private:
  std::unique_ptr<Executor> inner_;
};

BenchRunOptions run_options(int repetitions, int64_t n_batch = 512, bool warmup = true) {
  BenchRunOptions o;
  o.repetitions = repetitions;
  o.n_batch = n_batch;
  o.warmup = warmup;
  return o;
}

void expect_consistent_statistics(const BenchTiming& t, int repetitions) {
  ASSERT_EQ(t.samples_ns.size(), static_cast<size_t>(repetitions));
  ASSERT_EQ(t.samples_ts.size(), static_cast<size_t>(repetitions));
  double sum_ns = 0, sum_ts = 0;
  for (size_t i = 0; i < t.samples_ns.size(); ++i) {
    EXPECT_GT(t.samples_ns[i], 0u);
    EXPECT_DOUBLE_EQ(t.samples_ts[i],
                     1e9 * static_cast<double>(t.test.n_tokens()) / static_cast<double>(t.samples_ns[i]));
    sum_ns += static_cast<double>(t.samples_ns[i]);
    sum_ts += t.samples_ts[i];
  }
  EXPECT_EQ(t.avg_ns, static_cast<uint64_t>(std::llround(sum_ns / repetitions)));
  EXPECT_NEAR(t.avg_ts, sum_ts / repetitions, 1e-9 * t.avg_ts);
  EXPECT_EQ(t.stddev_ts, mean_sd(t.samples_ts).sd);
}

TEST(Benchmark, PromptTestEvaluatesThePromptFromAnEmptyCacheInBatches) {
  RecordingExecutor ex(executor());
  const BenchTiming t = run_bench_test(ex, {20, 0}, run_options(2, 8));
  EXPECT_EQ(t.test.n_prompt, 20);
  EXPECT_EQ(t.test.n_gen, 0);
  expect_consistent_statistics(t, 2);
  // Warm-up: the first batch of 8. Then per repeat 8 + 8 + 4 tokens at positions 0, 8, 16.
  const std::vector<int64_t> sizes = {8, 8, 8, 4, 8, 8, 4};
  EXPECT_EQ(ex.batch_sizes, sizes);
  const std::vector<int64_t> before = {0, 0, 8, 16, 0, 8, 16};
  EXPECT_EQ(ex.length_before, before);
  EXPECT_EQ(ex.first_pos, before);
  // Logits only for the prompt's last token (the warm-up's prompt is its one batch).
  const std::vector<int64_t> outputs = {1, 0, 0, 1, 0, 0, 1};
  EXPECT_EQ(ex.outputs, outputs);
  EXPECT_EQ(ex.sequence_length(0), 0);  // cleared after the last repeat
}

TEST(Benchmark, GenerationTestStepsOneTokenAtATimeAfterAOneTokenContext) {
  RecordingExecutor ex(executor());
  const BenchTiming t = run_bench_test(ex, {0, 5}, run_options(3));
  EXPECT_EQ(t.test.n_prompt, 0);
  EXPECT_EQ(t.test.n_gen, 5);
  expect_consistent_statistics(t, 3);
  // Warm-up: context token + 5 steps (at most 8); each repeat the same from a cleared cache.
  ASSERT_EQ(ex.batch_sizes.size(), 4u * 6u);
  for (size_t i = 0; i < ex.batch_sizes.size(); ++i) {
    EXPECT_EQ(ex.batch_sizes[i], 1) << i;
    EXPECT_EQ(ex.first_pos[i], static_cast<int64_t>(i % 6)) << i;
    EXPECT_EQ(ex.length_before[i], static_cast<int64_t>(i % 6)) << i;
    EXPECT_EQ(ex.outputs[i], 1) << i;
  }
  EXPECT_EQ(ex.sequence_length(0), 0);
}

TEST(Benchmark, ConcurrentGenerationStepsEverySequenceInOneBatch) {
  StageOptions so;
  so.n_ctx = 64;
  so.n_slots = 3;
  RecordingExecutor ex(std::make_unique<LocalExecutor>(stories(), so, 1));
  BenchRunOptions o = run_options(2, 512, false);
  // A wire that moves 1000 bytes per forward pass.
  o.wire_bytes = [&] { return static_cast<uint64_t>(ex.batch_sizes.size()) * 1000; };
  const BenchTiming t = run_bench_test(ex, {0, 4, 3}, o);
  EXPECT_EQ(t.test.name(), "tg4x3");
  EXPECT_EQ(t.test.n_tokens(), 12);
  expect_consistent_statistics(t, 2);
  // Each repeat: the three one-token contexts in one batch, then 4 steps of one token from each sequence.
  ASSERT_EQ(ex.batch_sizes.size(), 2u * 5u);
  for (size_t i = 0; i < ex.batch_sizes.size(); ++i) {
    EXPECT_EQ(ex.batch_sizes[i], 3) << i;
    EXPECT_EQ(ex.outputs[i], 3) << i;
    EXPECT_EQ(ex.first_pos[i], static_cast<int64_t>(i % 5)) << i;
  }
  // Only the timed steps count: 4 passes x 1000 bytes for 12 tokens.
  ASSERT_TRUE(t.wire_bytes_per_token.has_value());
  EXPECT_DOUBLE_EQ(*t.wire_bytes_per_token, 4000.0 / 12.0);
  for (int64_t s = 0; s < 3; ++s) EXPECT_EQ(ex.sequence_length(s), 0) << s;

  EXPECT_THROW(run_bench_test(ex, {0, 4, 4}, run_options(1)), Error);  // 4 sequences, 3 slots
  EXPECT_THROW(run_bench_test(ex, {8, 0, 2}, run_options(1)), Error);  // prompts run one sequence
  const BenchTiming local = run_bench_test(ex, {0, 2}, run_options(1));
  EXPECT_FALSE(local.wire_bytes_per_token.has_value());
}

// llama-bench's -d: the depth's tokens are evaluated untimed before every repeat (and the warm-up), in batches of
// n_batch without logits, and the test then runs at the positions after them.
TEST(Benchmark, DepthFillsEachRepeatsCacheBeforeTheTimedPart) {
  RecordingExecutor gen(executor());
  const BenchTiming g = run_bench_test(gen, {0, 3, 1, 10}, run_options(2, 4, false));
  EXPECT_EQ(g.test.name(), "tg3 @ d10");
  EXPECT_EQ(g.test.n_tokens(), 3) << "the depth is not timed";
  expect_consistent_statistics(g, 2);
  // Per repeat: depth batches of 4, 4, 2 at 0, 4, 8 (no logits), the start token at 10, then steps at 11, 12, 13.
  const std::vector<int64_t> gen_sizes = {4, 4, 2, 1, 1, 1, 1, 4, 4, 2, 1, 1, 1, 1};
  const std::vector<int64_t> gen_pos = {0, 4, 8, 10, 11, 12, 13, 0, 4, 8, 10, 11, 12, 13};
  const std::vector<int64_t> gen_out = {0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 1, 1, 1, 1};
  EXPECT_EQ(gen.batch_sizes, gen_sizes);
  EXPECT_EQ(gen.first_pos, gen_pos);
  EXPECT_EQ(gen.length_before, gen_pos);
  EXPECT_EQ(gen.outputs, gen_out);
  EXPECT_EQ(gen.sequence_length(0), 0);

  RecordingExecutor prompt(executor());
  const BenchTiming p = run_bench_test(prompt, {6, 0, 1, 10}, run_options(1, 4));
  EXPECT_EQ(p.test.name(), "pp6 @ d10");
  // Warm-up: the depth, then the prompt's first batch; the repeat: the depth, then 4 + 2 prompt tokens from 10.
  const std::vector<int64_t> prompt_sizes = {4, 4, 2, 4, 4, 4, 2, 4, 2};
  const std::vector<int64_t> prompt_pos = {0, 4, 8, 10, 0, 4, 8, 10, 14};
  const std::vector<int64_t> prompt_out = {0, 0, 0, 1, 0, 0, 0, 0, 1};
  EXPECT_EQ(prompt.batch_sizes, prompt_sizes);
  EXPECT_EQ(prompt.first_pos, prompt_pos);
  EXPECT_EQ(prompt.outputs, prompt_out);

  auto small = executor(1, 16);
  EXPECT_THROW(run_bench_test(*small, {0, 5, 1, 11}, run_options(1)), Error);  // 11 + 1 + 5 > 16
  EXPECT_NO_THROW(run_bench_test(*small, {0, 5, 1, 10}, run_options(1)));
  EXPECT_THROW(run_bench_test(*small, {6, 0, 1, 11}, run_options(1)), Error);
  EXPECT_THROW(run_bench_test(*small, {6, 0, 1, -1}, run_options(1)), Error);
}

TEST(Benchmark, DepthListsRunEveryTestAtEveryDepth) {
  const std::vector<int64_t> p = {16}, n = {8}, c = {1, 2}, d = {0, 100};
  const auto tests = bench_tests(p, n, c, d);
  std::vector<std::string> names;
  for (const BenchTest& t : tests) names.push_back(t.name());
  const std::vector<std::string> want = {"pp16", "pp16 @ d100", "tg8", "tg8 @ d100", "tg8x2", "tg8x2 @ d100"};
  EXPECT_EQ(names, want);
  BenchConfig config;
  config.n_prompt = {16};
  config.n_gen = {8};
  config.n_depth = {0, 100};
  EXPECT_EQ(bench_context(config), 116);
  config.n_gen = {30};
  EXPECT_EQ(bench_context(config), 131);
}

// The roofline of a generation test counts the cached keys and values each step reads besides the weights.
TEST(Benchmark, BytesPerTokenCountTheCacheAtTheTestsAverageContext) {
  // Steps at positions 101 .. 104 read 102 .. 105 positions: 103.5 on average, x 10 bytes.
  EXPECT_EQ(test_bytes_per_token({0, 4, 1, 100}, 1000, 10), 1000u + 1035u);
  // No depth: steps at 1 .. 4 read 2 .. 5 positions.
  EXPECT_EQ(test_bytes_per_token({0, 4}, 1000, 10), 1000u + 35u);
  EXPECT_EQ(test_bytes_per_token({0, 4, 1, 100}, 1000, 0), 1000u);
  EXPECT_EQ(kv_type_bytes("f16"), 2u);
  EXPECT_EQ(kv_type_bytes("f32"), 4u);
  EXPECT_THROW(kv_type_bytes("q8_0"), Error);
}

TEST(Benchmark, ConcurrencyListsAddGenerationTests) {
  const std::vector<int64_t> p = {16}, n = {8}, c = {1, 4};
  const auto tests = bench_tests(p, n, c);
  ASSERT_EQ(tests.size(), 3u);
  EXPECT_EQ(tests[0].name(), "pp16");
  EXPECT_EQ(tests[1].name(), "tg8");
  EXPECT_EQ(tests[2].name(), "tg8x4");
  BenchConfig config;
  config.concurrency = {1, 4, 2};
  EXPECT_EQ(bench_slots(config), 4);
}

TEST(Benchmark, WarmupCanBeSkipped) {
  RecordingExecutor ex(executor());
  run_bench_test(ex, {0, 3}, run_options(2, 512, false));
  EXPECT_EQ(ex.batch_sizes.size(), 2u * 4u);
}

TEST(Benchmark, TestsThatDoNotFitAreErrors) {
  auto ex = executor(1, 16);
  EXPECT_THROW(run_bench_test(*ex, {17, 0}, run_options(1)), Error);
  EXPECT_THROW(run_bench_test(*ex, {0, 16}, run_options(1)), Error);  // 16 steps after the context token
  EXPECT_NO_THROW(run_bench_test(*ex, {16, 0}, run_options(1)));
  EXPECT_NO_THROW(run_bench_test(*ex, {0, 15}, run_options(1)));
  EXPECT_THROW(run_bench_test(*ex, {4, 4}, run_options(1)), Error);
  EXPECT_THROW(run_bench_test(*ex, {0, 0}, run_options(1)), Error);
  EXPECT_THROW(run_bench_test(*ex, {4, 0}, run_options(0)), Error);
}

TEST(Benchmark, RunsEveryTestAtEveryThreadCountInLlamaBenchOrder) {
  BenchConfig config;
  config.n_prompt = {8, 16};
  config.n_gen = {4};
  config.threads = {1, 2};
  config.run = run_options(2);
  config.probe_seconds = 0.05;
  config.probe_buffer_bytes = 8u << 20;
  const BenchModel model = describe_bench_model("stories", *stories());
  std::vector<int> made;
  int reported = 0;
  const auto results = run_benchmarks(
      config, model,
      [&](int threads) {
        made.push_back(threads);
        return executor(threads, bench_context(config));
      },
      [&](const BenchResult&) { ++reported; });
  EXPECT_EQ(made, (std::vector<int>{1, 2}));
  ASSERT_EQ(results.size(), 6u);
  EXPECT_EQ(reported, 6);
  const std::vector<std::string> names = {"pp8", "pp16", "tg4", "pp8", "pp16", "tg4"};
  for (size_t i = 0; i < results.size(); ++i) {
    const BenchResult& r = results[i];
    EXPECT_EQ(r.timing.test.name(), names[i]);
    EXPECT_EQ(r.n_threads, i < 3 ? 1 : 2);
    EXPECT_EQ(r.n_batch, 512);
    EXPECT_EQ(r.type_k, "f16");
    EXPECT_EQ(r.isa, isa_name(select_isa()));
    EXPECT_EQ(r.test_time.size(), 20u) << r.test_time;  // 2026-01-31T12:34:56Z
    EXPECT_EQ(r.test_time.back(), 'Z');
    expect_consistent_statistics(r.timing, 2);
    ASSERT_TRUE(r.mem_read_gbps.has_value());
    EXPECT_GT(*r.mem_read_gbps, 0);
    if (r.timing.test.n_gen > 0) {
      // Measured before each repeat, and the figures follow from those pairs.
      ASSERT_EQ(r.timing.samples_gbps.size(), 2u);
      ASSERT_EQ(r.timing.samples_best_gbps.size(), 2u);
      for (size_t j = 0; j < 2; ++j) {
        EXPECT_GT(r.timing.samples_gbps[j], 0);
        EXPECT_GE(r.timing.samples_best_gbps[j], r.timing.samples_gbps[j]);
      }
      EXPECT_DOUBLE_EQ(*r.mem_read_gbps, (r.timing.samples_gbps[0] + r.timing.samples_gbps[1]) / 2);
      EXPECT_DOUBLE_EQ(*r.mem_read_best_gbps, (r.timing.samples_best_gbps[0] + r.timing.samples_best_gbps[1]) / 2);
      ASSERT_TRUE(r.roofline_fraction_best.has_value());
      EXPECT_LE(*r.roofline_fraction_best, *r.roofline_fraction);
      ASSERT_TRUE(r.roofline_ts && r.roofline_fraction);
      // The weights and the cache at the test's average context (f16: 2 bytes a value).
      const auto bytes = static_cast<double>(
          test_bytes_per_token(r.timing.test, model.decode_bytes_per_token, model.kv_values_per_position * 2));
      EXPECT_GT(bytes, static_cast<double>(model.decode_bytes_per_token));
      EXPECT_DOUBLE_EQ(*r.roofline_ts, *r.mem_read_gbps * 1e9 / bytes);
      double fraction = 0;
      for (size_t j = 0; j < 2; ++j) {
        fraction += r.timing.samples_ts[j] / (r.timing.samples_gbps[j] * 1e9 / bytes) / 2;
      }
      EXPECT_DOUBLE_EQ(*r.roofline_fraction, fraction);
    } else {
      EXPECT_TRUE(r.timing.samples_gbps.empty());
      EXPECT_FALSE(r.roofline_ts || r.roofline_fraction);
    }
  }
  // The prompt tests share the thread count's first measurement.
  EXPECT_EQ(results[0].mem_read_gbps, results[1].mem_read_gbps);
  EXPECT_EQ(results[3].mem_read_gbps, results[4].mem_read_gbps);
}

// A drift of the machine's bandwidth between repeats cancels out: each repeat counts against its own measurement.
TEST(Benchmark, RooflineFractionPairsEachRepeatWithItsBandwidth) {
  BenchResult r;
  r.timing.samples_ts = {50, 200};
  r.timing.samples_gbps = {1.0, 2.0};  // 1e7 bytes per token: rooflines of 100 and 200 tokens/s
  r.timing.samples_best_gbps = {1.25, 2.5};
  paired_roofline(r, 10'000'000);
  EXPECT_DOUBLE_EQ(*r.mem_read_gbps, 1.5);
  EXPECT_DOUBLE_EQ(*r.roofline_ts, 150);
  EXPECT_DOUBLE_EQ(*r.roofline_fraction, 0.75);  // (0.5 + 1) / 2, where the mean tokens/s over the mean roofline
                                                 // would say 125 / 150
  EXPECT_DOUBLE_EQ(*r.mem_read_best_gbps, 1.875);
  EXPECT_DOUBLE_EQ(*r.roofline_fraction_best, 0.6);  // (0.4 + 0.8) / 2
  r.timing.samples_best_gbps = {1.25};
  EXPECT_THROW(paired_roofline(r, 10'000'000), Error);
  r.timing.samples_best_gbps = {1.25, 2.5};
  r.timing.samples_gbps = {1.0};
  EXPECT_THROW(paired_roofline(r, 10'000'000), Error);
}

// An executor that says its weights live in `memory`.
class WeightsHere : public RecordingExecutor {
 public:
  WeightsHere(std::unique_ptr<Executor> inner, std::span<const uint8_t> memory)
      : RecordingExecutor(std::move(inner)), memory_(memory) {}
  std::span<const uint8_t> weight_memory() const override { return memory_; }

 private:
  std::span<const uint8_t> memory_;
};

// The roofline's bandwidth comes from the executor's weight pages when it has them and they are larger than the
// caches, else from a buffer of the probe's (always, when its size is given).
TEST(Benchmark, TheRooflineReadsTheWeightsPagesWhenTheExecutorHasThem) {
  const std::vector<uint8_t> big(size_t{256} << 20, 1), small(size_t{1} << 20, 1);
  const auto run = [&](const std::vector<uint8_t>& memory, uint64_t buffer_bytes) {
    BenchConfig config;
    config.n_prompt = {0};
    config.n_gen = {2};
    config.threads = {2};
    config.run = run_options(1);
    config.probe_seconds = 0.05;
    config.probe_buffer_bytes = buffer_bytes;
    const auto results = run_benchmarks(config, describe_bench_model("stories", *stories()), [&](int threads) {
      return std::make_unique<WeightsHere>(executor(threads), std::span<const uint8_t>(memory));
    });
    EXPECT_EQ(results.size(), 1u);
    EXPECT_TRUE(results.at(0).roofline_fraction.has_value());
    return results.at(0).mem_read_on;
  };
  EXPECT_EQ(run(big, 0), "weights");
  EXPECT_EQ(run(big, 8u << 20), "buffer") << "a buffer size asked for wins";
  EXPECT_EQ(run(small, 8u << 20), "buffer");
}

// A local executor's weights are the copy it streams from.
TEST(Benchmark, ALocalExecutorsWeightsAreItsCopy) {
  const auto e = executor();
  const auto& local = dynamic_cast<const LocalExecutor&>(*e);
  EXPECT_EQ(e->weight_memory().size(), local.stage().copied_bytes());
  EXPECT_GT(local.stage().copied_bytes(), 0u) << "copied by default";
}

TEST(Benchmark, WithoutTheProbeThereIsNoRoofline) {
  BenchConfig config;
  config.n_prompt = {0};
  config.n_gen = {2};
  config.threads = {1};
  config.run = run_options(1);
  config.probe = false;
  const auto results = run_benchmarks(config, describe_bench_model("stories", *stories()),
                                      [&](int threads) { return executor(threads); });
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].timing.test.name(), "tg2");
  EXPECT_FALSE(results[0].mem_read_gbps || results[0].roofline_ts || results[0].roofline_fraction);

  config.n_gen = {0};
  EXPECT_THROW(run_benchmarks(config, describe_bench_model("stories", *stories()),
                              [&](int threads) { return executor(threads); }),
               Error);
}

TEST(Benchmark, DescribesTheModel) {
  const BenchModel m = describe_bench_model("models/stories260K.gguf", *stories());
  const ModelProfile p = profile_model(stories()->file(), stories()->config());
  EXPECT_EQ(m.filename, "models/stories260K.gguf");
  EXPECT_EQ(m.type, "llama 293K F32");
  EXPECT_EQ(m.size, p.weight_bytes);
  EXPECT_EQ(m.n_params, p.n_params);
  EXPECT_EQ(m.decode_bytes_per_token, p.decode_bytes_per_token);
  EXPECT_GT(m.decode_bytes_per_token, 0u);
  EXPECT_LT(m.decode_bytes_per_token, m.size);  // one embedding row, not the whole table
  const ModelConfig& c = stories()->config();
  EXPECT_EQ(m.kv_values_per_position, static_cast<uint64_t>(c.n_layer * (c.n_embd_k() + c.n_embd_v())));
  EXPECT_GT(m.kv_values_per_position, 0u);
}

TEST(Benchmark, Statistics) {
  const std::vector<double> v = {1, 2, 3, 4};
  const MeanSd s = mean_sd(v);
  EXPECT_DOUBLE_EQ(s.mean, 2.5);
  EXPECT_DOUBLE_EQ(s.sd, std::sqrt(5.0 / 3.0));  // Bessel-corrected
  EXPECT_EQ(mean_sd(std::vector<double>{7}).sd, 0.0);
  EXPECT_EQ(mean_sd(std::vector<double>{}).mean, 0.0);
  EXPECT_DOUBLE_EQ(decode_roofline_ts(20.0, 500000000), 40.0);
  EXPECT_EQ(decode_roofline_ts(20.0, 0), 0.0);
}

TEST(Benchmark, ParsesLlamaBenchLists) {
  using V = std::vector<int64_t>;
  EXPECT_EQ(parse_int_list("512", "-p"), V{512});
  EXPECT_EQ(parse_int_list("128,512", "-p"), (V{128, 512}));
  EXPECT_EQ(parse_int_list("0", "-n"), V{0});
  EXPECT_EQ(parse_int_list("1-4", "-t", 1), (V{1, 2, 3, 4}));
  EXPECT_EQ(parse_int_list("128-512+128", "-p"), (V{128, 256, 384, 512}));
  EXPECT_EQ(parse_int_list("1-16*2,24", "-t", 1), (V{1, 2, 4, 8, 16, 24}));
  EXPECT_EQ(parse_int_list("100-300+150", "-p"), (V{100, 250}));
  EXPECT_EQ(parse_int_list("3-3", "-p"), V{3});
  EXPECT_EQ(parse_int_list("5-40*3", "-p"), (V{5, 15}));
  EXPECT_EQ(parse_int_list("4611686018427387904-9223372036854775807*2", "-p"), V{4611686018427387904});
}

void expect_list_error(std::string_view text, std::string_view flag, int64_t min_value, const std::string& why) {
  try {
    parse_int_list(text, flag, min_value);
    ADD_FAILURE() << "no error for " << text;
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(std::string(flag) + ": bad list '" + std::string(text) + "': " + why), std::string::npos) << msg;
  }
}

TEST(Benchmark, BadListsAreClearErrors) {
  expect_list_error("12,,x", "-p", 0, "empty item");
  expect_list_error("12,x", "-p", 0, "'x' is not a number");
  expect_list_error("", "-n", 0, "empty item");
  expect_list_error("64,", "-n", 0, "empty item");
  expect_list_error("-1", "-n", 0, "'-1' is not a number or a range");
  expect_list_error("8-2", "-t", 1, "the range '8-2' runs backwards");
  expect_list_error("1-8*1", "-t", 1, "the range '1-8*1' never advances");
  expect_list_error("1-8+", "-t", 1, "'1-8+' has no valid step after '+'");
  expect_list_error("0", "-t", 1, "0 is below the minimum of 1");
  expect_list_error("1.5", "-r", 1, "'1.5' is not a number");
  expect_list_error("1-100000", "-p", 0, "more than 4096 values");
}

// Data parallel copies run at the same time, each with its own sequences; the figures add up.
TEST(Benchmark, CopiesRunTheirSharesTogetherAndTheirRatesAddUp) {
  StageOptions so;
  so.n_ctx = 64;
  so.n_slots = 2;
  RecordingExecutor a(std::make_unique<LocalExecutor>(stories(), so, 1));
  RecordingExecutor b(std::make_unique<LocalExecutor>(stories(), so, 1));
  Executor* const copies[] = {&a, &b};
  const std::vector<std::string> names = {"local", "w1"};
  const int64_t sequences[] = {2, 1};
  const BenchTiming t = run_bench_copies(copies, names, sequences, 5, 0, run_options(2));
  EXPECT_EQ(t.test.n_gen, 5);
  EXPECT_EQ(t.test.n_seq, 3);
  ASSERT_EQ(t.samples_ts.size(), 2u);
  ASSERT_EQ(t.samples_ns.size(), 2u);
  for (size_t j = 0; j < 2; ++j) {
    // Each copy's rate over its own time adds up to at least all tokens over the longest time.
    EXPECT_GE(t.samples_ts[j], (1 - 1e-9) * 1e9 * 15.0 / static_cast<double>(t.samples_ns[j]));
  }
  EXPECT_NEAR(t.avg_ts, (t.samples_ts[0] + t.samples_ts[1]) / 2, 1e-9 * t.avg_ts);
  // Each copy stepped its own sequences only: two tokens per step on one, one on the other.
  for (size_t i = 0; i < a.batch_sizes.size(); ++i) {
    if (a.outputs[i] > 0) {
      EXPECT_EQ(a.batch_sizes[i], 2);
    }
  }
  for (size_t i = 0; i < b.batch_sizes.size(); ++i) {
    if (b.outputs[i] > 0) {
      EXPECT_EQ(b.batch_sizes[i], 1);
    }
  }
  EXPECT_GT(a.batch_sizes.size(), 10u);
  EXPECT_GT(b.batch_sizes.size(), 10u);
  // At a depth, every copy's steps run after it.
  a.first_pos.clear();
  const BenchTiming deep = run_bench_copies(copies, names, sequences, 2, 7, run_options(1, 512, false));
  EXPECT_EQ(deep.test.name(), "tg2x3 @ d7");
  EXPECT_EQ(a.first_pos, (std::vector<int64_t>{0, 7, 8, 9}));
  // A copy that cannot run its share is named.
  const int64_t too_many[] = {2, 3};
  try {
    run_bench_copies(copies, names, too_many, 5, 0, run_options(1));
    FAIL() << "3 sequences on 2 slots ran";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the copy on w1"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tessera
