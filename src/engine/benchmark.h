// Throughput benchmarks in the manner of llama-bench: prompt processing (ppN) and token generation (tgN) timed over
// repeats on an Executor, with the decode roofline (node bandwidth / bytes per token). `tessera bench` prints them.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "collective/communicator.h"
#include "engine/executor.h"
#include "hw/probe.h"
#include "model/model_weights.h"

namespace tessera {

// One test: exactly one of n_prompt and n_gen is positive, as in llama-bench.
struct BenchTest {
  int64_t n_prompt = 0;  // evaluate this many random tokens after the depth's, in batches of n_batch
  int64_t n_gen = 0;     // then this many single-token steps after the depth and one more token, each greedy
  // Sequences decoding together (generation tests): each step is one batch of one token from each of them, as
  // llama-batched-bench's -npl; the figure is their total tokens per second.
  int64_t n_seq = 1;
  // Tokens already in each sequence's cache when the timed part starts (llama-bench's -d): evaluated untimed
  // before every repeat, so the test measures prompt processing or generation at that context.
  int64_t n_depth = 0;
  std::string name() const;  // "pp512", "tg128", "tg64x4" (4 sequences), "tg128 @ d4096"
  int64_t n_tokens() const { return n_prompt + n_gen * n_seq; }
  // The context the test fills: the depth, then the prompt, or the one-token start and the generated tokens.
  int64_t n_context() const { return n_depth + (n_prompt > 0 ? n_prompt : n_gen + 1); }
};

struct BenchRunOptions {
  int repetitions = 5;
  int64_t n_batch = 512;
  bool warmup = true;    // one untimed run first: the first batch of a pp test, a few steps of a tg test
  uint64_t seed = 1234;  // the random tokens
  // Bytes on the wire so far (a distributed executor's links, both ways); unset for a local one.
  std::function<uint64_t()> wire_bytes;
  // When set: the memory bandwidth, measured untimed right before each timed repeat.
  std::function<ReadRate()> bandwidth;
  // When set (a rank under --tp/--ep): what this rank has spent in collectives so far.
  std::function<collective::CollectiveStats()> collectives;
  // When set (a rank of a later stage under --pp): the seconds it has waited for the stage before it so far.
  std::function<double()> pipeline_wait;
  // When set (bench --json-schema): puts a grammar on each generation sampler at the start of a run and again
  // whenever its grammar has ended; the sampled tokens advance it, so the timing includes every step's mask.
  std::function<void(Sampler&)> constrain;
};

// Per token of the timed runs: what a rank under --tp/--ep spent in collectives.
struct CollectivesPerToken {
  double calls = 0;
  double bytes = 0;
  double seconds = 0;
};

struct BenchTiming {
  BenchTest test;
  std::vector<uint64_t> samples_ns;  // each repeat's time
  std::vector<double> samples_ts;    // each repeat's tokens per second
  uint64_t avg_ns = 0, stddev_ns = 0;
  double avg_ts = 0, stddev_ts = 0;                // over samples_ts
  std::optional<double> wire_bytes_per_token;      // over the timed runs, when options.wire_bytes is set
  std::optional<CollectivesPerToken> collectives;  // over the timed runs, when options.collectives is set
  std::optional<double> pipeline_wait_s;           // per token, when options.pipeline_wait is set
  std::vector<double> samples_gbps;                // options.bandwidth's sustained rate before each repeat, when set
  std::vector<double> samples_best_gbps;           // and its best pass
};

// Warm-up, then `repetitions` timed runs of the test on sequences 0..n_seq-1 (cleared before each and after the
// last). Throws Error when the test does not fit the executor's context or its sequence slots.
BenchTiming run_bench_test(Executor& executor, const BenchTest& test, const BenchRunOptions& options);

// Data parallel: copy i runs a generation test with sequences[i] sequences, all copies at the same time on threads
// of their own. Each repeat's tokens/s is the sum over the copies, its time the longest; the first error thrown
// by a copy is rethrown naming it (labels[i]).
BenchTiming run_bench_copies(std::span<Executor* const> copies, std::span<const std::string> labels,
                             std::span<const int64_t> sequences, int64_t n_gen, int64_t n_depth,
                             const BenchRunOptions& options);

// Mean and standard deviation with Bessel's correction, as llama-bench reports them (sd 0 below two samples).
struct MeanSd {
  double mean = 0;
  double sd = 0;
};
MeanSd mean_sd(std::span<const double> values);

// Tokens per second a decode step would reach if it only had to stream decode_bytes_per_token at the bandwidth.
double decode_roofline_ts(double mem_read_gbps, uint64_t decode_bytes_per_token);

// Bytes a step of a one-sequence generation test reads on average: the weights (model.decode_bytes_per_token) and
// the cached keys and values of every position it attends to (the depth, the start token, the steps before it and
// its own), kv_bytes_per_position each.
uint64_t test_bytes_per_token(const BenchTest& test, uint64_t decode_bytes_per_token, uint64_t kv_bytes_per_position);

// A llama-bench style list of integers: "128,512", a range "first-last", "first-last+step" or "first-last*mult".
// Throws Error naming the flag and what is wrong ("-p: bad list '12,,x': empty item ...").
std::vector<int64_t> parse_int_list(std::string_view text, std::string_view flag, int64_t min_value = 0);

// The tests of one thread count in llama-bench's order: each prompt length, then each generation length at each
// concurrency (1 first), each at every depth (none given: 0); zero lengths are skipped (-n 0 runs no generation
// test).
std::vector<BenchTest> bench_tests(std::span<const int64_t> prompts, std::span<const int64_t> gens,
                                   std::span<const int64_t> concurrency = std::span<const int64_t>{},
                                   std::span<const int64_t> depths = std::span<const int64_t>{});

// What a report says about the model.
struct BenchModel {
  std::string filename;
  std::string type;   // "llama 1.1B Q4_K_M": architecture, parameters, file type
  uint64_t size = 0;  // bytes of all tensors
  uint64_t n_params = 0;
  uint64_t decode_bytes_per_token = 0;  // see model_profile.h (k of n experts for MoE)
  uint64_t kv_values_per_position = 0;  // keys and values cached per token position, all layers together
};
BenchModel describe_bench_model(const std::string& filename, const ModelWeights& weights);

struct BenchConfig {
  std::vector<int64_t> n_prompt = {512};
  std::vector<int64_t> n_gen = {128};
  std::vector<int64_t> concurrency = {1};  // sequences decoding together in generation tests
  std::vector<int64_t> n_depth = {0};      // context before each test (llama-bench's -d)
  std::vector<int> threads;                // empty: all cores
  BenchRunOptions run;
  std::string type_k = "f16";
  bool probe = true;                // measure bandwidth per thread count for the roofline
  double probe_seconds = 1.0;       // per thread count, and a quarter of it before each repeat of a tg test
  uint64_t probe_buffer_bytes = 0;  // 0: the probe's default
  // Distributed runs: the workers besides the head and the layer split, reported with each result.
  int n_workers = 0;
  std::string split;
};

// One row of a report (llama-bench's fields, plus the roofline).
struct BenchResult {
  BenchModel model;
  int64_t n_batch = 0;
  int n_threads = 0;
  std::string type_k;
  std::string test_time;  // RFC 3339 UTC, when the test started
  BenchTiming timing;
  std::string isa;
  // When probed. One-sequence tg tests measure the bandwidth before each repeat (timing.samples_gbps): then this is
  // their mean, roofline_ts its roofline, and roofline_fraction the mean of each repeat's tokens/s over the roofline
  // of the bandwidth measured just before it, so that a drift of the machine's speed during the run cancels out.
  // The bandwidth is the sustained one (ReadRate): a repeat's tokens/s is an average over its time too. The `_best`
  // fields repeat the figures against the best pass, which on a quiet machine are the same.
  std::optional<double> mem_read_gbps;
  std::optional<double> mem_read_best_gbps;
  // What the bandwidth was read from: "weights" (the executor's own weight pages, when it has them in one buffer
  // larger than the caches) or "buffer" (a fresh one of the probe's); empty when not probed.
  std::string mem_read_on;
  std::optional<double> roofline_ts;  // tg tests of one sequence
  std::optional<double> roofline_fraction;
  std::optional<double> roofline_fraction_best;
  // bench --check-plan under mpirun (--tp/--ep/--pp): the planner's tokens/s for the run that was measured.
  std::optional<double> predicted_ts;
  int n_workers = 0;  // 0: a local run
  std::string split;  // "0-10@a,11-21@b" for a distributed run
};

// Sets r's bandwidth, roofline and fraction from the bandwidth measured before each repeat (see BenchResult) for a
// step that reads bytes_per_token; throws Error unless there is one sample per repeat.
void paired_roofline(BenchResult& r, uint64_t bytes_per_token);

// Bytes per cached value of a KV cache type ("f16", "f32").
uint64_t kv_type_bytes(const std::string& type_k);

// Makes an executor with a pool of the given size; its context must hold the longest test, its slots the highest
// concurrency.
using ExecutorFactory = std::function<std::unique_ptr<Executor>(int threads)>;
// Reads the wire byte counter of an executor the factory made (unset, or nullopt: no wire, a local run).
using WireCounter = std::function<std::optional<uint64_t>(const Executor&)>;

// Context the tests need: the deepest depth plus the longest prompt, or the longest generation and its one-token
// start.
int64_t bench_context(const BenchConfig& config);
// Sequence slots the tests need: the highest concurrency.
int64_t bench_slots(const BenchConfig& config);

// Runs every test at every thread count (one executor per thread count, made when its turn comes) and reports
// each result to on_result as it completes. Progress goes to standard error.
std::vector<BenchResult> run_benchmarks(const BenchConfig& config, const BenchModel& model,
                                        const ExecutorFactory& make_executor,
                                        const std::function<void(const BenchResult&)>& on_result = {},
                                        const WireCounter& wire_counter = {});

}  // namespace tessera
