// Measures this node: memory read bandwidth, int8 and f32 compute rates, cores, memory, CPU and the kernels' ISA.
// `tessera probe` prints it, `tessera bench` uses the bandwidth for its roofline, the planner's cost model reads it.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "hw/batch_rate.h"
#include "tensor/kernels.h"

namespace tessera {

struct ProbeOptions {
  int threads = 0;            // 0: all cores
  double seconds = 3.0;       // time budget for the measurements (buffer set-up comes on top)
  uint64_t buffer_bytes = 0;  // bandwidth buffer; 0: max(1 GiB, 4x the last-level cache), within free memory
  // Also read with every CPU of the machine (ProbeResult::machine_read_gbps) when `threads` are fewer; off where
  // the processes of one machine probe at the same time (mpirun's ranks: their reads are summed instead).
  bool machine_rate = true;
};

// A streaming read measurement, 1e9 bytes/s. `sustained`: the fastest read loop's bytes over the total time of its
// passes, an average over time as a decode's tokens/s is; `best_pass`: the fastest single pass. On a quiet machine
// they agree; a shared host's memory is faster now and then for some milliseconds, so a rate averaged over time
// falls short of the best pass even when it reads as fast as the loop itself (docs/perf-log/probe-roofline.md).
struct ReadRate {
  double sustained = 0;
  double best_pass = 0;
};

struct ProbeResult {
  int threads = 0;                // threads of the multi-threaded figures
  double mem_read_gbps = 0;       // streaming read bandwidth (ReadRate::sustained), 1e9 bytes/s, all `threads`
  double mem_read_best_gbps = 0;  // the fastest pass of that measurement (ReadRate::best_pass)
  double mem_read_gbps_1t = 0;    // the sustained bandwidth from one thread
  // The machine's: one reader on each of its online CPUs, this process's own and the others (measure_machine_read).
  // Nodes of one machine share this; 0 when it could not be measured.
  double machine_read_gbps = 0;
  int machine_cpus = 0;                // the CPUs that measurement read with
  std::vector<BatchRate> batch_rates;  // the quantized matmul's rate by tokens per pass (measure_batch_rates)
  double int8_gops = 0;                // int8 dot products (u8 x s8 -> s32), multiply and add counted as 2 ops
  double f32_gflops = 0;               // f32 fused multiply-add, counted as 2 flops
  int cores = 0;                       // logical CPUs this process may run on
  uint64_t mem_total_bytes = 0;        // /proc/meminfo MemTotal
  uint64_t mem_available_bytes = 0;    // /proc/meminfo MemAvailable
  std::string cpu;                     // model name
  std::string isa;                     // the path Tessera's kernels take (select_isa)
};

ProbeResult probe_node(const ProbeOptions& options);

// The last probe, kept for a while: its measurements take seconds and hardly change within minutes, while free
// memory does, so that is read again on every call. A worker answers the planner's ProbeRequests from one.
class ProbeCache {
 public:
  // A result for `options`: the kept one when it was measured with the same threads less than max_age_s ago,
  // else a new measurement (kept for next time). `age_s` gets the measurement's age (0 when just measured).
  ProbeResult get(const ProbeOptions& options, double max_age_s, double& age_s);

 private:
  std::mutex mutex_;  // one measurement at a time; a second caller waits and reuses it
  std::optional<ProbeResult> last_;
  std::chrono::steady_clock::time_point measured_at_{};
};

// Streaming read bandwidth alone (plain and prefetched loads, the fastest of them) over a fresh buffer (buffer_bytes
// 0: the default size).
ReadRate measure_read(int threads, double seconds, uint64_t buffer_bytes = 0);

// The same measurement kept ready: threads and buffer are made once, so that `tessera bench` can measure right
// before each timed repeat and pair the two (a shared host's bandwidth drifts within minutes).
class ReadProbe {
 public:
  explicit ReadProbe(int threads, uint64_t buffer_bytes = 0);  // threads 0: all cores
  // Reads `memory` (kept alive by the caller) instead of a buffer of its own: a model's weights, whose pages may
  // read faster or slower than a fresh buffer's on a virtual machine (docs/perf-log/probe-roofline.md). Throws Error
  // when it holds less than one read block.
  ReadProbe(int threads, std::span<const uint8_t> memory);
  ~ReadProbe();
  ReadProbe(const ReadProbe&) = delete;
  ReadProbe& operator=(const ReadProbe&) = delete;
  ReadRate measure(double seconds);  // passes for about `seconds`
  uint64_t bytes() const;            // read per pass
  uint64_t last_xor() const;         // XOR of every word the last pass read: a test that passes read all of it

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// Whether one read of `bytes` per pass measures the memory rather than a cache: at least 256 MiB, more than the
// last-level cache one core can use on today's CPUs (AMD's stacked cache included). Not the reported one: a
// virtual machine may report its host's whole L3, of which only a fraction is in reach.
bool reads_past_caches(uint64_t bytes);

// A measurement's figures from its passes' times (seconds; pass i read `pass_bytes` with way i % ways): the best
// pass, and the way with the highest rate over all of its passes (passes that took no measurable time are left
// out).
ReadRate rate_of_passes(std::span<const double> pass_seconds, int ways, double pass_bytes);

// The machine's sustained read rate (1e9 bytes/s) with a reader on each of `cpus` (its online CPUs when empty): the
// caller reads on the CPU it runs on, threads of its own are bound to the others, whatever this process's affinity
// (a node that taskset keeps to one core shares the machine's memory with nodes on the other cores, and only the
// whole machine's rate tells how much each of them gets). Throws Error when a CPU cannot be bound (a control group
// that withholds it), naming it.
double measure_machine_read(double seconds, std::vector<int> cpus = {}, uint64_t buffer_bytes = 0);
// The machine's online CPUs (/sys/devices/system/cpu/online); empty when that cannot be read.
std::vector<int> online_cpus();

// Logical CPUs in this process's affinity mask (all cores by default for -t).
int available_cores();
std::string cpu_model_name();

// The logical CPUs in this process's affinity mask, ascending; empty when the mask cannot be read.
std::vector<int> affinity_cpus();
// The running system's identity (the kernel's boot id): processes that report the same one share the machine's
// cores and memory. Empty when it cannot be read.
std::string machine_id();
// CPU lists as taskset writes them: "0-3,8". The parser throws Error naming what is wrong (at most max_cpus CPUs,
// ascending, none repeated).
std::string cpu_list_text(const std::vector<int>& cpus);
std::vector<int> parse_cpu_list(std::string_view text, size_t max_cpus);

// The memory this process may use: MemTotal and MemAvailable, each capped by its control group's limit and headroom
// (memory_limit.h), so that a container's limit counts everywhere (probe, planner, admission, the copy at load).
struct MemInfo {
  uint64_t total_bytes = 0;
  uint64_t available_bytes = 0;
  uint64_t cgroup_limit_bytes = 0;  // 0: no limit
};
MemInfo read_meminfo();

// The measured loops, one set per instruction set (probe_avx2.cpp and probe_avx512.cpp are compiled for theirs and
// are called only when the CPU has it). Declared here so that tests can check each one does the work it claims.
namespace probe_kernels {

// XOR of n 64-bit words, n a multiple of kReadBlockWords: every byte is loaded, and the result depends on all.
// The scalar loops; the SIMD paths' (plain, prefetched as the decode kernels do, twice as far, in bursts) are the
// kernels' own, Kernels::stream_probe().
inline constexpr size_t kReadBlockWords = StreamProbeFns::kBlockWords;
uint64_t xor_words_scalar(const uint64_t* p, size_t n);

// Compute loops: `iters` iterations of independent multiply-accumulate chains on all-ones inputs. They return the
// number of multiplies the hardware performed, read back from the accumulators (exact for iters <= kMaxIters), so
// the caller's op count comes from the computation itself: ops = 2 * result.
inline constexpr uint64_t kMaxIters = 1 << 16;
uint64_t int8_dot_scalar(uint64_t iters);
uint64_t f32_fma_scalar(uint64_t iters);

// Keeps a value alive: the compiler must assume it is used, so the loop that made it cannot be dropped.
inline void keep(uint64_t value) { asm volatile("" : : "r"(value) : "memory"); }

}  // namespace probe_kernels

}  // namespace tessera
