// The node probe: every figure positive and finite under a tiny budget, and each measured loop doing exactly the
// work it is credited with (all bytes read, the claimed number of multiplies), on every ISA this CPU runs.
#include <gtest/gtest.h>
#include <sched.h>

#include <cmath>
#include <cstring>
#include <random>
#include <span>
#include <vector>

#include "hw/probe.h"
#include "support/isa_test.h"
#include "tensor/kernels.h"
#include "util/error.h"

namespace tessera {
namespace {

namespace pk = probe_kernels;

ProbeOptions tiny(int threads) {
  ProbeOptions o;
  o.threads = threads;
  o.seconds = 0.2;
  o.buffer_bytes = 16u << 20;
  return o;
}

void expect_positive_finite(double v, const char* what) {
  EXPECT_TRUE(std::isfinite(v)) << what;
  EXPECT_GT(v, 0.0) << what;
}

TEST(Probe, TinyBudgetGivesPositiveFiguresForEveryField) {
  const ProbeResult r = probe_node(tiny(0));
  EXPECT_EQ(r.threads, available_cores());
  EXPECT_EQ(r.cores, available_cores());
  EXPECT_GE(r.cores, 1);
  expect_positive_finite(r.mem_read_gbps, "mem_read_gbps");
  EXPECT_GE(r.mem_read_best_gbps, r.mem_read_gbps) << "an average of passes is never above the best of them";
  expect_positive_finite(r.mem_read_gbps_1t, "mem_read_gbps_1t");
  expect_positive_finite(r.int8_gops, "int8_gops");
  expect_positive_finite(r.f32_gflops, "f32_gflops");
  EXPECT_GT(r.mem_total_bytes, 0u);
  EXPECT_GT(r.mem_available_bytes, 0u);
  EXPECT_LE(r.mem_available_bytes, r.mem_total_bytes);
  EXPECT_FALSE(r.cpu.empty());
  EXPECT_EQ(r.isa, isa_name(select_isa()));
}

TEST(Probe, OneThreadReportsTheSameBandwidthTwice) {
  const ProbeResult r = probe_node(tiny(1));
  EXPECT_EQ(r.threads, 1);
  EXPECT_EQ(r.mem_read_gbps, r.mem_read_gbps_1t);
  expect_positive_finite(r.mem_read_gbps, "mem_read_gbps");
}

TEST(Probe, MoreThreadsThanCoresStillMeasures) {
  const ProbeResult r = probe_node(tiny(available_cores() + 1));
  EXPECT_EQ(r.threads, available_cores() + 1);
  expect_positive_finite(r.mem_read_gbps, "mem_read_gbps");
  expect_positive_finite(r.int8_gops, "int8_gops");
}

TEST(Probe, BandwidthAloneIsPositive) {
  for (int threads : {1, 2}) {
    const ReadRate r = measure_read(threads, 0.05, 8u << 20);
    expect_positive_finite(r.sustained, "sustained");
    EXPECT_GE(r.best_pass, r.sustained) << threads << " thread(s)";
  }
}

// The sustained rate is the best way's bytes over its passes' total time, not its best pass: a decode's tokens/s is
// such an average, and a VM's memory has fast moments no whole token sees (docs/perf-log/probe-roofline.md).
TEST(Probe, TheSustainedRateIsTheBestWaysAverageOverTime) {
  // 1 GB per pass; way 0 took 0.5 and 1.5 s (its best pass 2 GB/s, on average 1 GB/s), way 1 0.8 s twice.
  const std::vector<double> seconds = {0.5, 0.8, 1.5, 0.8};
  ReadRate r = rate_of_passes(seconds, 2, 1e9);
  EXPECT_DOUBLE_EQ(r.best_pass, 2.0);
  EXPECT_DOUBLE_EQ(r.sustained, 1.25);
  // One way: all passes together; a pass too short for the clock is left out of both figures.
  r = rate_of_passes(std::vector<double>{1.0, 0.0, 0.25}, 1, 1e9);
  EXPECT_DOUBLE_EQ(r.best_pass, 4.0);
  EXPECT_DOUBLE_EQ(r.sustained, 2.0 / 1.25);
  r = rate_of_passes(std::vector<double>{}, 3, 1e9);
  EXPECT_EQ(r.best_pass, 0.0);
  EXPECT_EQ(r.sustained, 0.0);
  EXPECT_THROW(rate_of_passes(seconds, 0, 1e9), Error);
}

// Over memory the caller holds (a model's weights): the lines inside it from its first line boundary, every word of
// them read by each pass with one thread or several claiming 2 MiB at a time, the last claim short.
TEST(Probe, ReadsTheMemoryItIsGiven) {
  std::mt19937_64 rng(11);
  std::vector<uint64_t> words((size_t{5} << 20) / 8 + 3 * pk::kReadBlockWords + 5);
  for (auto& w : words) w = rng();
  const auto* bytes = reinterpret_cast<const uint8_t*>(words.data()) + 3;  // off every boundary
  const size_t size = words.size() * 8 - 3;
  const size_t skip = (64 - reinterpret_cast<uintptr_t>(bytes) % 64) % 64;
  const size_t read_words = (size - skip) / 8 / pk::kReadBlockWords * pk::kReadBlockWords;
  uint64_t expected = 0;
  for (size_t i = 0; i < read_words; ++i) {
    uint64_t w;
    std::memcpy(&w, bytes + skip + 8 * i, 8);
    expected ^= w;
  }
  for (int threads : {1, 2, 3}) {
    ReadProbe probe(threads, std::span<const uint8_t>(bytes, size));
    EXPECT_EQ(probe.bytes(), read_words * 8) << threads;
    expect_positive_finite(probe.measure(0.02).sustained, "gbps");
    EXPECT_EQ(probe.last_xor(), expected) << threads << " thread(s)";
  }
  EXPECT_THROW(ReadProbe(1, std::span<const uint8_t>(bytes, 100)), Error);
  // A buffer of its own is read whole the same way.
  ReadProbe own(2, 8u << 20);
  EXPECT_EQ(own.bytes(), 8u << 20);
  own.measure(0.02);
  EXPECT_NE(own.last_xor(), 0u);
}

TEST(Probe, OnlyReadsOfAQuarterGigabyteOrMoreMeasureTheMemory) {
  EXPECT_FALSE(reads_past_caches(255u << 20));
  EXPECT_TRUE(reads_past_caches(256u << 20));
}

TEST(Probe, BadOptionsAreErrors) {
  ProbeOptions o = tiny(-1);
  EXPECT_THROW(probe_node(o), Error);
  o = tiny(1);
  o.seconds = 0;
  EXPECT_THROW(probe_node(o), Error);
  EXPECT_THROW(measure_read(1, -1.0, 8u << 20), Error);
}

TEST(Probe, MachineFacts) {
  const MemInfo m = read_meminfo();
  EXPECT_GT(m.total_bytes, uint64_t{1} << 20);
  EXPECT_LE(m.available_bytes, m.total_bytes);
  EXPECT_FALSE(cpu_model_name().empty());
  EXPECT_GE(available_cores(), 1);
  EXPECT_EQ(affinity_cpus().size(), static_cast<size_t>(available_cores()));
  EXPECT_FALSE(machine_id().empty());
  EXPECT_EQ(machine_id(), machine_id());
}

// A node kept to one CPU (taskset) still measures the whole machine's read rate, with a reader on every online CPU,
// and its own CPUs are what they were after it.
TEST(Probe, TheMachinesRateReadsOnEveryOnlineCpuWhateverTheAffinity) {
  const std::vector<int> online = online_cpus();
  ASSERT_FALSE(online.empty());
  const std::vector<int> before = affinity_cpus();
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(before.front(), &one);
  ASSERT_EQ(sched_setaffinity(0, sizeof one, &one), 0);
  const ProbeResult r = probe_node(tiny(1));
  EXPECT_EQ(affinity_cpus(), std::vector<int>{before.front()});
  cpu_set_t all;
  CPU_ZERO(&all);
  for (int cpu : before) CPU_SET(cpu, &all);
  ASSERT_EQ(sched_setaffinity(0, sizeof all, &all), 0);
  EXPECT_EQ(r.machine_cpus, static_cast<int>(online.size()));
  expect_positive_finite(r.machine_read_gbps, "machine_read_gbps");
  if (online.size() == 1) {
    EXPECT_EQ(r.machine_read_gbps, r.mem_read_gbps);
  }
  expect_positive_finite(measure_machine_read(0.05, online, 16u << 20), "measure_machine_read");
  // A CPU the machine does not have is an error naming it, not a reader sharing the caller's CPU.
  try {
    measure_machine_read(0.05, {online.back() + 1000}, 16u << 20);
    ADD_FAILURE() << "a CPU that is not there was read with";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(std::to_string(online.back() + 1000)), std::string::npos) << e.what();
  }
}

// The matmul's ramp by tokens per pass: one point per count, ascending, each a fraction of the largest count's rate
// (itself 1); a pass of 8 tokens is no faster per token than one of 256 by more than the noise of a shared core.
TEST(Probe, BatchRatesAreFractionsOfTheFullRate) {
  if (select_isa() == Isa::Scalar) {
    EXPECT_TRUE(measure_batch_rates(0.3).empty()) << "the scalar path is not timed";
    return;
  }
  const std::vector<BatchRate> rates = measure_batch_rates(0.3);
  ASSERT_EQ(rates.size(), std::size(kBatchRateTokens));
  for (size_t i = 0; i < rates.size(); ++i) {
    EXPECT_EQ(rates[i].tokens, kBatchRateTokens[i]);
    expect_positive_finite(rates[i].fraction, "fraction");
    EXPECT_LT(rates[i].fraction, 1.5) << rates[i].tokens << " tokens";
  }
  EXPECT_EQ(rates.back().fraction, 1.0);
  EXPECT_EQ(probe_node(tiny(1)).batch_rates.size(), rates.size());
  EXPECT_THROW(measure_batch_rates(0), Error);
}

TEST(Probe, CpuListsReadAsTasksetWritesThem) {
  EXPECT_EQ(cpu_list_text({0, 1, 2, 3, 8, 10, 11}), "0-3,8,10-11");
  EXPECT_EQ(cpu_list_text({5}), "5");
  EXPECT_EQ(cpu_list_text({}), "");
  EXPECT_EQ(parse_cpu_list("0-3,8,10-11", 64), (std::vector<int>{0, 1, 2, 3, 8, 10, 11}));
  EXPECT_EQ(parse_cpu_list("", 64), std::vector<int>{});
  const auto mine = affinity_cpus();
  EXPECT_EQ(parse_cpu_list(cpu_list_text(mine), mine.size()), mine);
  const auto error = [](std::string_view text, size_t max) {
    try {
      parse_cpu_list(text, max);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(error("0,x", 8), "CPU list '0,x': 'x' is not a CPU number or range");
  EXPECT_EQ(error("0,", 8), "CPU list '0,': '' is not a CPU number or range");
  EXPECT_EQ(error("3-1", 8), "CPU list '3-1': range '3-1' runs backwards");
  EXPECT_EQ(error("2,1", 8), "CPU list '2,1': '1' is not above the CPUs before it");
  EXPECT_EQ(error("0-9", 8), "CPU list '0-9': more than 8 CPUs");
  EXPECT_EQ(error("-1", 8), "CPU list '-1': '-1' is not a CPU number or range");
}

// Each path's loops, tested on every path this CPU has; a path it lacks is skipped by name.
class ProbeLoops : public test::IsaTest {};
TESSERA_ISA_TEST_SUITE(ProbeLoops);

using ReadLoop = std::pair<const char*, uint64_t (*)(const uint64_t*, size_t)>;

std::vector<ReadLoop> read_loops(Isa isa) {
  if (isa == Isa::Scalar) return {{"plain", pk::xor_words_scalar}};
  const StreamProbeFns& s = Kernels::get(isa).stream_probe();
  return {{"plain", s.xor_words},
          {"prefetched", s.xor_words_nta},
          {"prefetched far", s.xor_words_far},
          {"prefetched in bursts", s.xor_words_burst}};
}

TEST_P(ProbeLoops, ReadLoopsLoadEveryWord) {
  // The XOR of every word, compared with a plain loop: a loop that skipped or was optimised away would differ.
  std::mt19937_64 rng(7);
  std::vector<uint64_t> words(pk::kReadBlockWords * 37);
  for (auto& w : words) w = rng();
  uint64_t expected = 0;
  for (uint64_t w : words) expected ^= w;
  for (const auto& [name, loop] : read_loops(isa())) {
    ASSERT_NE(loop, nullptr) << name;
    EXPECT_EQ(loop(words.data(), words.size()), expected) << name;
    EXPECT_EQ(loop(words.data(), 0), 0u) << name;
    // Any start address works: the loads are unaligned ones.
    uint64_t tail = 0;
    for (size_t i = 1; i < 1 + pk::kReadBlockWords * 36; ++i) tail ^= words[i];
    EXPECT_EQ(loop(words.data() + 1, pk::kReadBlockWords * 36), tail) << name;
    // The last word counts too.
    words.back() ^= 1;
    EXPECT_EQ(loop(words.data(), words.size()), expected ^ 1) << name;
    words.back() ^= 1;
  }
}

struct ComputeLoop {
  const char* name;
  uint64_t (*fn)(uint64_t);
  uint64_t multiplies_per_vector;  // lanes x products per lane of one instruction
};

std::vector<ComputeLoop> compute_loops(Isa isa) {
  if (isa == Isa::Scalar) return {{"int8", pk::int8_dot_scalar, 4}, {"f32", pk::f32_fma_scalar, 1}};
  const StreamProbeFns& s = Kernels::get(isa).stream_probe();
  const uint64_t bytes = isa == Isa::Avx512 ? 64 : 32;
  std::vector<ComputeLoop> loops = {{"int8", s.int8_dot, bytes}, {"f32", s.f32_fma, bytes / 4}};
  if (isa == Isa::Avx2 && detect_cpu_features().avx_vnni) loops.push_back({"int8 avx-vnni", s.int8_dot_avx_vnni, 32});
  return loops;
}

TEST_P(ProbeLoops, ComputeLoopsCountTheMultipliesTheyDo) {
  // Each loop reports the multiplies it performed, read back from its accumulators: proportional to the
  // iteration count (so no iteration was skipped or folded) and whole vectors' worth per iteration.
  for (const auto& loop : compute_loops(isa())) {
    ASSERT_NE(loop.fn, nullptr) << loop.name;
    const uint64_t one = loop.fn(1);
    EXPECT_GT(one, 0u) << loop.name;
    EXPECT_EQ(one % loop.multiplies_per_vector, 0u) << loop.name;
    EXPECT_EQ(loop.fn(0), 0u) << loop.name;
    EXPECT_EQ(loop.fn(1000), 1000 * one) << loop.name;
    EXPECT_EQ(loop.fn(pk::kMaxIters), pk::kMaxIters * one) << loop.name;
  }
}

}  // namespace
}  // namespace tessera
