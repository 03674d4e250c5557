// llama-bench's method on Tessera's Executor: random in-vocabulary tokens, a warm-up, timed repeats from a cleared
// sequence, tokens/s per repeat, mean and Bessel-corrected deviation; plus the decode roofline from the probe.
#include "engine/benchmark.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <chrono>
#include <cmath>
#include <ctime>
#include <map>
#include <random>
#include <thread>

#include "engine/local_executor.h"
#include "grammar/constraint.h"
#include "hw/probe.h"
#include "model/model_profile.h"
#include "model/quant_mix.h"
#include "tensor/kernels.h"
#include "util/error.h"
#include "util/log.h"

namespace tessera {
namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kMaxListValues = 4096;

[[noreturn]] void bad_list(std::string_view flag, std::string_view text, std::string_view why) {
  fail(
      "{}: bad list '{}': {} (expected numbers separated by commas, e.g. 128,512, or a range first-last, "
      "first-last+step or first-last*mult)",
      flag, text, why);
}

[[noreturn]] void bad_value(std::string_view flag, std::string_view text, int64_t v, int64_t min_value) {
  fail("{}: bad list '{}': {} is below the minimum of {}", flag, text, v, min_value);
}

// Parses a whole unsigned decimal number, or returns nullopt.
std::optional<int64_t> parse_number(std::string_view s) {
  if (s.empty() || !std::isdigit(static_cast<unsigned char>(s.front()))) return std::nullopt;
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

std::string now_rfc3339() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// general.file_type as the mix name gen-model and llama-quantize use ("Q4_K_M"); else the commonest matrix type.
std::string file_type_label(const gguf::GgufFile& file) {
  std::string label;
  if (const auto ft = file.metadata().opt_u64("general.file_type")) {
    const std::string names = quant_mix_names();
    size_t pos = 0;
    while (pos <= names.size() && label.empty()) {
      const size_t comma = std::min(names.find(", ", pos), names.size());
      const QuantMix mix = quant_mix_from_name(std::string_view(names).substr(pos, comma - pos));
      if (mix.file_type == *ft) label = mix.name;
      pos = comma + 2;
    }
  }
  if (label.empty()) {
    std::map<std::string, uint64_t> bytes_by_type;
    for (const auto& t : file.tensors()) {
      if (t.ne.size() >= 2) bytes_by_type[std::string(type_name(t.type))] += t.n_bytes;
    }
    uint64_t most = 0;
    for (const auto& [name, bytes] : bytes_by_type) {
      if (bytes > most) {
        most = bytes;
        label = name;
      }
    }
  }
  for (auto& ch : label) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  return label.empty() ? "?" : label;
}

// Two or three significant digits, as model names give sizes: 293K, 3.8M, 1.1B, 30B.
std::string params_label(uint64_t n) {
  const auto x = static_cast<double>(n);
  const auto scaled = [](double v, const char* unit) {
    return v < 10 ? fmt::format("{:.1f}{}", v, unit) : fmt::format("{:.0f}{}", v, unit);
  };
  if (n >= 1000000000) return scaled(x / 1e9, "B");
  if (n >= 1000000) return scaled(x / 1e6, "M");
  return scaled(x / 1e3, "K");
}

// Mean and deviation of the repeats' times and rates.
void summarize(BenchTiming& r) {
  std::vector<double> ns(r.samples_ns.begin(), r.samples_ns.end());
  const MeanSd t = mean_sd(ns);
  r.avg_ns = static_cast<uint64_t>(std::llround(t.mean));
  r.stddev_ns = static_cast<uint64_t>(std::llround(t.sd));
  const MeanSd ts = mean_sd(r.samples_ts);
  r.avg_ts = ts.mean;
  r.stddev_ts = ts.sd;
}

}  // namespace

std::string BenchTest::name() const {
  const std::string depth = n_depth > 0 ? fmt::format(" @ d{}", n_depth) : std::string();
  if (n_prompt > 0) return fmt::format("pp{}{}", n_prompt, depth);
  return n_seq > 1 ? fmt::format("tg{}x{}{}", n_gen, n_seq, depth) : fmt::format("tg{}{}", n_gen, depth);
}

MeanSd mean_sd(std::span<const double> values) {
  MeanSd r;
  if (values.empty()) return r;
  double sum = 0;
  for (double v : values) sum += v;
  r.mean = sum / static_cast<double>(values.size());
  if (values.size() < 2) return r;
  double sq = 0;
  for (double v : values) sq += (v - r.mean) * (v - r.mean);
  r.sd = std::sqrt(sq / static_cast<double>(values.size() - 1));
  return r;
}

double decode_roofline_ts(double mem_read_gbps, uint64_t decode_bytes_per_token) {
  if (decode_bytes_per_token == 0 || !(mem_read_gbps > 0)) return 0;
  return mem_read_gbps * 1e9 / static_cast<double>(decode_bytes_per_token);
}

uint64_t test_bytes_per_token(const BenchTest& test, uint64_t decode_bytes_per_token, uint64_t kv_bytes_per_position) {
  // Step i (1 .. n_gen) writes position depth + i and attends to positions 0 .. depth + i: depth + i + 1 of them,
  // depth + (n_gen + 1) / 2 + 1 on average; rounded to whole bytes.
  const double positions = static_cast<double>(test.n_depth) + static_cast<double>(test.n_gen + 1) / 2 + 1;
  return decode_bytes_per_token +
         static_cast<uint64_t>(std::llround(positions * static_cast<double>(kv_bytes_per_position)));
}

uint64_t kv_type_bytes(const std::string& type_k) {
  if (type_k == "f16") return 2;
  if (type_k == "f32") return 4;
  fail("unknown KV cache type '{}' (expected f16 or f32)", type_k);
}

std::vector<int64_t> parse_int_list(std::string_view text, std::string_view flag, int64_t min_value) {
  std::vector<int64_t> out;
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t comma = std::min(text.find(',', pos), text.size());
    const std::string_view item = text.substr(pos, comma - pos);
    pos = comma + 1;
    if (item.empty()) bad_list(flag, text, "empty item");
    const size_t dash = item.find('-');
    if (dash == std::string_view::npos) {
      const auto v = parse_number(item);
      if (!v) bad_list(flag, text, fmt::format("'{}' is not a number", item));
      if (*v < min_value) bad_value(flag, text, *v, min_value);
      out.push_back(*v);
      continue;
    }
    // A range: first-last, optionally +step or *mult.
    const std::string_view first_s = item.substr(0, dash);
    std::string_view rest = item.substr(dash + 1);
    char op = '+';
    int64_t by = 1;
    const size_t op_pos = rest.find_first_of("+*");
    if (op_pos != std::string_view::npos) {
      op = rest[op_pos];
      const auto b = parse_number(rest.substr(op_pos + 1));
      if (!b) bad_list(flag, text, fmt::format("'{}' has no valid step after '{}'", item, op));
      by = *b;
      rest = rest.substr(0, op_pos);
    }
    const auto first = parse_number(first_s);
    const auto last = parse_number(rest);
    if (!first || !last) bad_list(flag, text, fmt::format("'{}' is not a number or a range", item));
    if (*first > *last) bad_list(flag, text, fmt::format("the range '{}' runs backwards", item));
    if ((op == '+' && by < 1) || (op == '*' && by < 2)) {
      bad_list(flag, text, fmt::format("the range '{}' never advances", item));
    }
    if (*first < min_value) bad_value(flag, text, *first, min_value);
    if (op == '*' && *first == 0) bad_list(flag, text, fmt::format("the range '{}' starts at 0 and never grows", item));
    for (int64_t v = *first;;) {
      if (out.size() >= kMaxListValues) bad_list(flag, text, fmt::format("more than {} values", kMaxListValues));
      out.push_back(v);
      // Stop before stepping past `last`, which also keeps v from overflowing.
      if (op == '+' ? v > *last - by : v > *last / by) break;
      v = op == '+' ? v + by : v * by;
    }
  }
  return out;
}

std::vector<BenchTest> bench_tests(std::span<const int64_t> prompts, std::span<const int64_t> gens,
                                   std::span<const int64_t> concurrency, std::span<const int64_t> depths) {
  std::vector<BenchTest> tests;
  const std::vector<int64_t> one = {1}, zero = {0};
  const std::span<const int64_t> ds = depths.empty() ? std::span<const int64_t>(zero) : depths;
  for (int64_t p : prompts) {
    if (p <= 0) continue;
    for (int64_t d : ds) tests.push_back({p, 0, 1, std::max<int64_t>(d, 0)});
  }
  const std::span<const int64_t> cs = concurrency.empty() ? std::span<const int64_t>(one) : concurrency;
  for (int64_t n : gens) {
    if (n <= 0) continue;
    for (int64_t c : cs) {
      for (int64_t d : ds) tests.push_back({0, n, std::max<int64_t>(c, 1), std::max<int64_t>(d, 0)});
    }
  }
  return tests;
}

BenchTiming run_bench_test(Executor& executor, const BenchTest& test, const BenchRunOptions& options) {
  if ((test.n_prompt > 0) == (test.n_gen > 0) || test.n_prompt < 0 || test.n_gen < 0) {
    fail("a benchmark test has either a prompt or a generation length, got pp {} tg {}", test.n_prompt, test.n_gen);
  }
  if (test.n_seq < 1 || (test.n_prompt > 0 && test.n_seq != 1)) {
    fail("{}: {} sequences; a generation test runs 1 or more, a prompt test 1", test.name(), test.n_seq);
  }
  if (test.n_seq > executor.n_slots()) {
    fail("{} needs {} sequences at once, the executor has {} slots", test.name(), test.n_seq, executor.n_slots());
  }
  if (options.repetitions < 1) fail("the number of repetitions must be positive, got {}", options.repetitions);
  if (options.n_batch < 1) fail("the batch size must be positive, got {}", options.n_batch);
  if (test.n_depth < 0) fail("{}: the depth must not be negative, got {}", test.name(), test.n_depth);
  const int64_t needed = test.n_context();
  if (needed > executor.n_ctx()) {
    fail("{} needs a context of {} tokens, the executor has {}", test.name(), needed, executor.n_ctx());
  }
  const int64_t depth = test.n_depth;
  const int64_t n_seq = test.n_seq;
  const int64_t n_vocab = executor.config().n_vocab;
  std::mt19937_64 rng(options.seed);
  std::uniform_int_distribution<int32_t> pick(0, static_cast<int32_t>(n_vocab - 1));
  // Drawn before the clock starts; a run reuses them, the cache is cleared in between. Sequence s has tokens
  // [s * needed, (s + 1) * needed).
  std::vector<int32_t> tokens(static_cast<size_t>(needed * n_seq));
  for (auto& t : tokens) t = pick(rng);
  const auto token = [&](int64_t s, int64_t i) { return tokens[static_cast<size_t>(s * needed + i)]; };
  const auto clear = [&] {
    for (int64_t s = 0; s < n_seq; ++s) executor.clear_sequence(s);
  };

  Batch batch;
  std::vector<float> logits;
  // Evaluates each sequence's tokens [begin, end) at their positions, n_batch at a time (one sequence: prompts;
  // several: their one-token contexts in one batch); logits only for the last when asked.
  const auto prefill = [&](int64_t begin, int64_t end, bool last_logits) {
    for (int64_t b = begin; b < end; b += options.n_batch) {
      const int64_t e = std::min(end, b + options.n_batch);
      batch.clear();
      for (int64_t s = 0; s < n_seq; ++s) {
        for (int64_t i = b; i < e; ++i) {
          batch.add(token(s, i), static_cast<int32_t>(s), static_cast<int32_t>(i), last_logits && i == end - 1);
        }
      }
      executor.decode(batch, logits);
    }
  };
  // One token per sequence per step, sampled greedily, as a generation loop (or a server's batch) runs: a pipeline
  // samples on its last node, so only token ids come back, as in real generation. An executor with several lanes
  // (a pipeline) gets that many groups of sequences stepping on their own, as the server's scheduler runs them.
  SamplerParams greedy;
  greedy.temperature = 0.0f;
  std::vector<Sampler> samplers;
  for (int64_t s = 0; s < n_seq; ++s) samplers.emplace_back(greedy, static_cast<int32_t>(n_vocab));
  const int64_t groups = std::clamp<int64_t>(executor.lanes(), 1, n_seq);
  std::vector<SampleRequest> requests;
  const auto constrain_all = [&] {
    if (!options.constrain) return;
    for (auto& sampler : samplers) options.constrain(sampler);
  };
  // The picks of group g's step advance its samplers' grammars (a grammar that has ended starts again).
  const auto advance_grammars = [&](int64_t g, const StepResult& r) {
    size_t k = 0;
    for (int64_t s = g; s < n_seq; s += groups) {
      Sampler& sampler = samplers[static_cast<size_t>(s)];
      if (k >= r.sampled.size()) fail("the executor returned {} tokens for a bigger step", r.sampled.size());
      sampler.accept(r.sampled[k++].token);
      if (sampler.grammar() != nullptr && sampler.grammar()->ended()) options.constrain(sampler);
    }
  };
  const auto generate = [&](int64_t steps) {
    std::vector<int64_t> stepped(static_cast<size_t>(groups), 0);
    std::map<uint64_t, int64_t> group_of;  // steps in flight: ticket -> group
    const auto submit = [&](int64_t g) {
      const int64_t i = stepped[static_cast<size_t>(g)] + 1;
      batch.clear();
      requests.clear();
      for (int64_t s = g; s < n_seq; s += groups) {
        batch.add(token(s, depth + i), static_cast<int32_t>(s), static_cast<int32_t>(depth + i), true);
        requests.push_back({&samplers[static_cast<size_t>(s)], -1});
      }
      group_of[executor.submit_step(batch, requests)] = g;
    };
    for (int64_t g = 0; g < groups && steps > 0; ++g) submit(g);
    std::string error;
    while (!group_of.empty()) {
      const StepResult r = executor.collect_step();
      const auto it = group_of.find(r.ticket);
      if (it == group_of.end()) fail("the executor returned step {}, which is not in flight", r.ticket);
      const int64_t g = it->second;
      group_of.erase(it);
      if (!r.error.empty() && error.empty()) error = r.error;
      if (error.empty() && options.constrain) advance_grammars(g, r);
      if (error.empty() && ++stepped[static_cast<size_t>(g)] < steps) submit(g);
    }
    if (!error.empty()) fail("{}", error);
  };

  if (options.warmup) {
    clear();
    prefill(0, depth, false);
    if (test.n_prompt > 0) {
      prefill(depth, depth + std::min(test.n_prompt, options.n_batch), true);
    } else {
      prefill(depth, depth + 1, true);
      constrain_all();
      generate(std::min<int64_t>(test.n_gen, 8));
    }
  }

  BenchTiming r;
  r.test = test;
  uint64_t wire_bytes = 0;
  collective::CollectiveStats spent;
  double waited = 0;
  for (int rep = 0; rep < options.repetitions; ++rep) {
    clear();
    prefill(0, depth, false);
    if (test.n_gen > 0) prefill(depth, depth + 1, true);  // the token a generation test starts from
    constrain_all();
    if (options.bandwidth) {
      const ReadRate rate = options.bandwidth();
      r.samples_gbps.push_back(rate.sustained);
      r.samples_best_gbps.push_back(rate.best_pass);
    }
    const uint64_t wire0 = options.wire_bytes ? options.wire_bytes() : 0;
    const collective::CollectiveStats before =
        options.collectives ? options.collectives() : collective::CollectiveStats{};
    const double wait0 = options.pipeline_wait ? options.pipeline_wait() : 0.0;
    const auto t0 = Clock::now();
    if (test.n_prompt > 0) {
      prefill(depth, depth + test.n_prompt, true);
    } else {
      generate(test.n_gen);
    }
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count();
    if (options.wire_bytes) wire_bytes += options.wire_bytes() - wire0;
    if (options.pipeline_wait) waited += options.pipeline_wait() - wait0;
    if (options.collectives) {
      const collective::CollectiveStats after = options.collectives();
      spent.calls += after.calls - before.calls;
      spent.bytes += after.bytes - before.bytes;
      spent.seconds += after.seconds - before.seconds;
    }
    const auto sample = static_cast<uint64_t>(std::max<int64_t>(ns, 1));
    r.samples_ns.push_back(sample);
    r.samples_ts.push_back(1e9 * static_cast<double>(test.n_tokens()) / static_cast<double>(sample));
  }
  clear();
  const auto timed_tokens = static_cast<double>(test.n_tokens() * static_cast<int64_t>(options.repetitions));
  if (options.wire_bytes) r.wire_bytes_per_token = static_cast<double>(wire_bytes) / timed_tokens;
  if (options.pipeline_wait) r.pipeline_wait_s = waited / timed_tokens;
  if (options.collectives) {
    r.collectives = CollectivesPerToken{static_cast<double>(spent.calls) / timed_tokens,
                                        static_cast<double>(spent.bytes) / timed_tokens, spent.seconds / timed_tokens};
  }

  summarize(r);
  return r;
}

BenchTiming run_bench_copies(std::span<Executor* const> copies, std::span<const std::string> labels,
                             std::span<const int64_t> sequences, int64_t n_gen, int64_t n_depth,
                             const BenchRunOptions& options) {
  if (copies.empty() || copies.size() != sequences.size() || copies.size() != labels.size()) {
    fail("{} copies with {} sequence counts and {} names", copies.size(), sequences.size(), labels.size());
  }
  std::vector<BenchTiming> timings(copies.size());
  std::vector<std::string> errors(copies.size());
  {
    std::vector<std::jthread> runs;
    for (size_t i = 0; i < copies.size(); ++i) {
      runs.emplace_back([&, i] {
        try {
          timings[i] = run_bench_test(*copies[i], BenchTest{0, n_gen, sequences[i], n_depth}, options);
        } catch (const std::exception& e) {
          errors[i] = e.what();
        }
      });
    }
  }
  for (size_t i = 0; i < copies.size(); ++i) {
    if (!errors[i].empty()) fail("the copy on {}: {}", labels[i], errors[i]);
  }
  BenchTiming r;
  int64_t n_seq = 0;
  for (int64_t s : sequences) n_seq += s;
  r.test = BenchTest{0, n_gen, n_seq, n_depth};
  for (size_t j = 0; j < timings[0].samples_ts.size(); ++j) {
    double ts = 0;
    uint64_t ns = 0;
    for (const BenchTiming& t : timings) {
      ts += t.samples_ts.at(j);
      ns = std::max(ns, t.samples_ns.at(j));
    }
    r.samples_ts.push_back(ts);
    r.samples_ns.push_back(ns);
  }
  summarize(r);
  return r;
}

void paired_roofline(BenchResult& r, uint64_t bytes_per_token) {
  const std::vector<double>& ts = r.timing.samples_ts;
  const auto fraction = [&](const std::vector<double>& gbps, const char* what) {
    if (gbps.empty() || gbps.size() != ts.size()) fail("{} {} samples for {} repeats", gbps.size(), what, ts.size());
    std::vector<double> fractions;
    for (size_t i = 0; i < ts.size(); ++i) fractions.push_back(ts[i] / decode_roofline_ts(gbps[i], bytes_per_token));
    return mean_sd(fractions).mean;
  };
  r.roofline_fraction = fraction(r.timing.samples_gbps, "bandwidth");
  r.roofline_fraction_best = fraction(r.timing.samples_best_gbps, "best-pass bandwidth");
  r.mem_read_gbps = mean_sd(r.timing.samples_gbps).mean;
  r.mem_read_best_gbps = mean_sd(r.timing.samples_best_gbps).mean;
  r.roofline_ts = decode_roofline_ts(*r.mem_read_gbps, bytes_per_token);
}

BenchModel describe_bench_model(const std::string& filename, const ModelWeights& weights) {
  const ModelProfile profile = profile_model(weights.file(), weights.config());
  BenchModel m;
  m.filename = filename;
  m.size = profile.weight_bytes;
  m.n_params = profile.n_params;
  m.decode_bytes_per_token = profile.decode_bytes_per_token;
  const ModelConfig& c = weights.config();
  m.kv_values_per_position = 0;
  for (int64_t il = 0; il < c.n_layer; ++il) {
    const LayerShape s = c.layer(il);
    if (s.kv_source == il) m.kv_values_per_position += static_cast<uint64_t>(s.n_embd_k() + s.n_embd_v());
  }
  m.type = fmt::format("{} {} {}", weights.config().arch_name, params_label(profile.n_params),
                       file_type_label(weights.file()));
  return m;
}

int64_t bench_slots(const BenchConfig& config) {
  int64_t n = 1;
  for (int64_t c : config.concurrency) n = std::max(n, c);
  return n;
}

int64_t bench_context(const BenchConfig& config) {
  int64_t n = 1;
  for (const BenchTest& t : bench_tests(config.n_prompt, config.n_gen, config.concurrency, config.n_depth)) {
    n = std::max(n, t.n_context());
  }
  return n;
}

std::vector<BenchResult> run_benchmarks(const BenchConfig& config, const BenchModel& model,
                                        const ExecutorFactory& make_executor,
                                        const std::function<void(const BenchResult&)>& on_result,
                                        const WireCounter& wire_counter) {
  for (int64_t c : config.concurrency) {
    if (c < 1) fail("the concurrency must be positive, got {}", c);
  }
  const std::vector<BenchTest> tests = bench_tests(config.n_prompt, config.n_gen, config.concurrency, config.n_depth);
  if (tests.empty()) fail("nothing to run: every prompt (-p) and generation (-n) length is 0");
  std::vector<int> threads = config.threads;
  if (threads.empty()) threads.push_back(available_cores());
  for (int t : threads) {
    if (t < 1) fail("thread counts must be positive, got {}", t);
  }
  const std::string isa(isa_name(select_isa()));

  std::vector<BenchResult> results;
  for (int t : threads) {
    std::unique_ptr<Executor> executor = make_executor(t);
    BenchRunOptions run = config.run;
    if (wire_counter && wire_counter(*executor)) {
      const Executor* e = executor.get();
      run.wire_bytes = [e, &wire_counter] { return wire_counter(*e).value_or(0); };
    }
    if (const auto* local = dynamic_cast<const LocalExecutor*>(executor.get());
        local != nullptr && local->communicator() != nullptr) {
      const collective::Communicator* comm = local->communicator();
      run.collectives = [comm] { return comm->stats(); };
      if (local->pipelined()) run.pipeline_wait = [local] { return local->pipeline_wait_seconds(); };
    }
    std::optional<ReadProbe> probe;
    std::optional<ReadRate> rate;
    std::string read_on;
    if (config.probe) {
      // The weights' own pages when the executor has them here: on a virtual machine two buffers' pages may read at
      // different rates (docs/perf-log/probe-roofline.md), so a fresh buffer's bandwidth may sit above or below the one
      // decode meets.
      const std::span<const uint8_t> weights = executor->weight_memory();
      if (config.probe_buffer_bytes == 0 && reads_past_caches(weights.size())) {
        probe.emplace(t, weights);
        read_on = "weights";
      } else {
        probe.emplace(t, config.probe_buffer_bytes);
        read_on = "buffer";
      }
      rate = probe->measure(config.probe_seconds);
      log_info(
          "bench: {} thread(s): memory read {:.2f} GB/s sustained, {:.2f} best pass (over {:.0f} MiB of {}), decode "
          "roofline {:.2f} tokens/s",
          t, rate->sustained, rate->best_pass, static_cast<double>(probe->bytes()) / (1 << 20),
          read_on == "weights" ? "the weights" : "a buffer",
          decode_roofline_ts(rate->sustained, model.decode_bytes_per_token));
    }
    for (const BenchTest& test : tests) {
      log_info("bench: {} with {} thread(s): {}{} timed run(s)", test.name(), t,
               config.run.warmup ? "a warm-up and " : "", config.run.repetitions);
      BenchResult r;
      r.model = model;
      r.n_batch = config.run.n_batch;
      r.n_threads = t;
      r.type_k = config.type_k;
      r.isa = isa;
      r.test_time = now_rfc3339();
      r.n_workers = config.n_workers;
      r.split = config.split;
      // The roofline is one stream's: several sequences share each read of the weights.
      const bool roofline = probe && test.n_gen > 0 && test.n_seq == 1 && model.decode_bytes_per_token > 0;
      BenchRunOptions test_run = run;
      if (roofline) test_run.bandwidth = [&] { return probe->measure(config.probe_seconds / 4); };
      r.timing = run_bench_test(*executor, test, test_run);
      if (rate) {
        r.mem_read_gbps = rate->sustained;
        r.mem_read_best_gbps = rate->best_pass;
      }
      r.mem_read_on = read_on;
      if (roofline) {
        paired_roofline(r, test_bytes_per_token(test, model.decode_bytes_per_token,
                                                model.kv_values_per_position * kv_type_bytes(config.type_k)));
      }
      if (on_result) on_result(r);
      results.push_back(std::move(r));
    }
  }
  return results;
}

}  // namespace tessera
