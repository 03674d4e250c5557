// The node probe: streaming reads of a buffer far larger than the last-level cache (the fastest loop's rate over
// several passes, all threads and one), int8 and f32 multiply-accumulate loops on the ISA the kernels use, and the
// machine's facts.
#include "hw/probe.h"

#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <span>
#include <thread>
#include <vector>

#include "hw/memory_limit.h"
#include "tensor/kernels.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace tessera {
namespace {

using Clock = std::chrono::steady_clock;
using XorFn = uint64_t (*)(const uint64_t*, size_t);
using LoopFn = uint64_t (*)(uint64_t);

constexpr uint64_t kMiB = uint64_t{1} << 20;
constexpr uint64_t kGiB = uint64_t{1} << 30;
constexpr uint64_t kHugePage = 2 * kMiB;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Four ways to stream: plain loads, loads behind the decode kernels' prefetch (each step's lines, or bursts as the
// 32-element formats' panels ask), and behind one twice as far ahead. Which is fastest depends on the machine and
// its moment, so the probe times all of them: the roofline then sits below neither what the kernels reach nor what
// a loop that only reads gets (docs/perf-log/probe-roofline.md).
struct ReadLoops {
  XorFn plain;
  XorFn prefetched;
  XorFn prefetched_far;
  XorFn prefetched_burst;
};

struct Loops {
  ReadLoops read;
  LoopFn int8;
  LoopFn f32;
};

// The loops of the path select_isa() picks, so the figures describe what Tessera's kernels can reach.
Loops loops_for(Isa isa, const CpuFeatures& f) {
  switch (isa) {
    case Isa::Avx512:
    case Isa::Avx2: {
      const StreamProbeFns& s = Kernels::get(isa).stream_probe();
      // A build without the SIMD kernels (-DTESSERA_SIMD_KERNELS=OFF, the sanitizer trees) serves this ISA with the
      // scalar table, which has no loops to time: the scalar ones stand in (calling the null ones crashed a worker).
      if (!s.xor_words || !s.xor_words_nta || !s.xor_words_far || !s.xor_words_burst || !s.int8_dot || !s.f32_fma) {
        break;
      }
      return {{s.xor_words, s.xor_words_nta, s.xor_words_far, s.xor_words_burst},
              f.avx_vnni && s.int8_dot_avx_vnni ? s.int8_dot_avx_vnni : s.int8_dot,
              s.f32_fma};
    }
    case Isa::Scalar:
      break;
  }
  return {{probe_kernels::xor_words_scalar, probe_kernels::xor_words_scalar, probe_kernels::xor_words_scalar,
           probe_kernels::xor_words_scalar},
          probe_kernels::int8_dot_scalar,
          probe_kernels::f32_fma_scalar};
}

uint64_t last_level_cache_bytes() {
  for (int name : {_SC_LEVEL3_CACHE_SIZE, _SC_LEVEL2_CACHE_SIZE}) {
    const long v = sysconf(name);
    if (v > 0) return static_cast<uint64_t>(v);
  }
  return 64 * kMiB;
}

uint64_t default_buffer_bytes() {
  uint64_t bytes = std::max(kGiB, 4 * last_level_cache_bytes());
  // Leave most free memory alone: the probe may run beside a loaded model.
  const uint64_t available = read_meminfo().available_bytes;
  if (available > 0) bytes = std::min(bytes, std::max(64 * kMiB, available / 4));
  return bytes;
}

// The words of thread t's share when n_words is split over n_threads in whole read blocks.
std::pair<size_t, size_t> share(size_t n_words, int t, int n_threads) {
  const size_t blocks = n_words / probe_kernels::kReadBlockWords;
  const size_t b0 = blocks * static_cast<size_t>(t) / static_cast<size_t>(n_threads);
  const size_t b1 = blocks * static_cast<size_t>(t + 1) / static_cast<size_t>(n_threads);
  return {b0 * probe_kernels::kReadBlockWords, b1 * probe_kernels::kReadBlockWords};
}

// What a pass reads: words in whole read blocks (the tail short of one is left out).
std::span<const uint64_t> read_blocks(const uint64_t* p, size_t words) {
  return {p, words / probe_kernels::kReadBlockWords * probe_kernels::kReadBlockWords};
}

// A page-aligned buffer filled by the threads that will read it (first touch places pages near them).
class ReadBuffer {
 public:
  ReadBuffer(uint64_t bytes, ThreadPool& pool) {
    bytes = std::max<uint64_t>(kHugePage, (bytes + kHugePage - 1) / kHugePage * kHugePage);
    data_.reset(static_cast<uint64_t*>(std::aligned_alloc(kHugePage, bytes)));
    if (!data_) fail("cannot allocate {} MiB for the memory bandwidth test", bytes / kMiB);
    // Huge pages cut TLB misses, which would otherwise be measured along with the memory.
    madvise(data_.get(), bytes, MADV_HUGEPAGE);
    n_words_ = bytes / sizeof(uint64_t);
    pool.run([&](int t) {
      const auto [w0, w1] = share(n_words_, t, pool.size());
      uint64_t x = 0x9e3779b97f4a7c15ull * static_cast<uint64_t>(t + 1);
      for (size_t i = w0; i < w1; ++i) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        data_.get()[i] = x;
      }
    });
  }
  std::span<const uint64_t> words() const { return read_blocks(data_.get(), n_words_); }

 private:
  struct Free {
    void operator()(uint64_t* p) const { std::free(p); }
  };
  std::unique_ptr<uint64_t, Free> data_;
  size_t n_words_ = 0;
};

// Words per claim of a multi-threaded pass (2 MiB). Threads claim from a shared counter until everything is read,
// so a pass measures what the memory gives all of them together, as decode's matmuls (whose threads take from each
// other's ranges) get it; with fixed shares the slower vCPU would set the pass time (docs/perf-log/probe-roofline.md).
// A claim is long enough that its cold start does not count.
constexpr size_t kClaimWords = (size_t{2} << 20) / sizeof(uint64_t);

// Passes over all of `words` by `threads` threads of the pool (1: the caller alone), taking the four loops in turn
// until `seconds` have passed and each ran at least once. `last_xor` (when given) gets the XOR of every word the
// last pass read.
ReadRate read_rate(std::span<const uint64_t> words, ThreadPool& pool, int threads, ReadLoops loops, double seconds,
                   uint64_t* last_xor = nullptr) {
  std::vector<uint64_t> sinks(static_cast<size_t>(pool.size()), 0);
  const auto start = Clock::now();
  const XorFn ways[] = {loops.plain, loops.prefetched, loops.prefetched_far, loops.prefetched_burst};
  constexpr int kWays = static_cast<int>(std::size(ways));
  const size_t total = words.size();
  std::vector<double> pass_seconds;
  for (int pass = 0; pass < 22 * kWays; ++pass) {
    const XorFn read = ways[pass % kWays];
    const auto t0 = Clock::now();
    std::fill(sinks.begin(), sinks.end(), 0);
    if (threads == 1) {
      sinks[0] = read(words.data(), total);
    } else {
      std::atomic<size_t> next{0};
      pool.run([&](int t) {
        if (t >= threads) return;
        uint64_t x = 0;
        for (size_t w = next.fetch_add(kClaimWords, std::memory_order_relaxed); w < total;
             w = next.fetch_add(kClaimWords, std::memory_order_relaxed)) {
          x ^= read(words.data() + w, std::min(total - w, kClaimWords));
        }
        sinks[static_cast<size_t>(t)] = x;
      });
    }
    pass_seconds.push_back(seconds_since(t0));
    if (pass >= kWays - 1 && seconds_since(start) >= seconds) break;
  }
  uint64_t all = 0;
  for (uint64_t s : sinks) all ^= s;
  probe_kernels::keep(all);
  if (last_xor != nullptr) *last_xor = all;
  return rate_of_passes(pass_seconds, kWays, static_cast<double>(total * sizeof(uint64_t)));
}

// Operations per second of a compute loop run by every thread of the pool until the deadline.
double loop_rate(ThreadPool& pool, LoopFn loop, double seconds) {
  constexpr uint64_t kChunk = 2048;  // iterations between clock reads (~10-50 us)
  std::vector<uint64_t> work(static_cast<size_t>(pool.size()), 0);
  const auto t0 = Clock::now();
  const auto deadline = t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  pool.run([&](int t) {
    uint64_t multiplies = 0;
    do {
      multiplies += loop(kChunk);
    } while (Clock::now() < deadline);
    work[static_cast<size_t>(t)] = multiplies;
  });
  const double dt = seconds_since(t0);
  uint64_t total = 0;
  for (uint64_t w : work) total += w;
  probe_kernels::keep(total);
  return dt > 0 ? 2.0 * static_cast<double>(total) / dt : 0.0;
}

// The first part of a run can be slow (clock ramp-up, wide-vector licence), and on a shared machine any part can
// lose a thread to another task for a scheduler tick or two; a peak rate is what the loop reaches undisturbed, so
// the best of four quarters counts (with two halves, 2-thread results on the development VM spread 930-1,300 GOPS).
double best_loop_rate(ThreadPool& pool, LoopFn loop, double seconds) {
  double best = 0;
  for (int part = 0; part < 4; ++part) best = std::max(best, loop_rate(pool, loop, seconds / 4));
  return best;
}

void check_options(int threads, double seconds) {
  if (threads < 0) fail("the thread count must be positive, got {}", threads);
  if (!(seconds > 0) || seconds > 3600) fail("the probe time must be in (0, 3600] seconds, got {}", seconds);
}

}  // namespace

bool reads_past_caches(uint64_t bytes) { return bytes >= 256 * kMiB; }

ReadRate rate_of_passes(std::span<const double> pass_seconds, int ways, double pass_bytes) {
  if (ways < 1) fail("passes taken by {} ways", ways);
  std::vector<double> way_seconds(static_cast<size_t>(ways), 0.0);
  std::vector<int> way_passes(static_cast<size_t>(ways), 0);
  ReadRate r;
  for (size_t i = 0; i < pass_seconds.size(); ++i) {
    const double dt = pass_seconds[i];
    if (!(dt > 0)) continue;  // a clock too coarse for the pass says nothing about its rate
    way_seconds[i % way_seconds.size()] += dt;
    ++way_passes[i % way_passes.size()];
    r.best_pass = std::max(r.best_pass, pass_bytes / dt / 1e9);
  }
  // The ways' passes alternate, so each way's average covers the same stretch of time.
  for (size_t w = 0; w < way_seconds.size(); ++w) {
    if (way_passes[w] > 0) r.sustained = std::max(r.sustained, way_passes[w] * pass_bytes / way_seconds[w] / 1e9);
  }
  return r;
}

int available_cores() {
  const size_t n = affinity_cpus().size();
  return n > 0 ? static_cast<int>(n) : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

std::vector<int> affinity_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> out;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return out;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &set)) out.push_back(cpu);
  }
  return out;
}

std::string machine_id() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  return std::getline(in, id) ? id : std::string();
}

std::string cpu_list_text(const std::vector<int>& cpus) {
  std::string out;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(cpus[i]);
    if (j > i) out += '-' + std::to_string(cpus[j]);
    i = j + 1;
  }
  return out;
}

std::vector<int> parse_cpu_list(std::string_view text, size_t max_cpus) {
  std::vector<int> out;
  const auto number = [&](std::string_view part, std::string_view item) {
    int v = 0;
    const auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), v);
    if (part.empty() || ec != std::errc() || end != part.data() + part.size() || v < 0 || v >= (1 << 20)) {
      fail("CPU list '{}': '{}' is not a CPU number or range", text, item);
    }
    return v;
  };
  size_t start = 0;
  while (start <= text.size() && !text.empty()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::string_view item = text.substr(start, comma - start);
    const size_t dash = item.find('-');
    const int first = number(item.substr(0, dash), item);
    const int last = dash == std::string_view::npos ? first : number(item.substr(dash + 1), item);
    if (last < first) fail("CPU list '{}': range '{}' runs backwards", text, item);
    if (!out.empty() && first <= out.back()) fail("CPU list '{}': '{}' is not above the CPUs before it", text, item);
    if (out.size() + static_cast<size_t>(last - first) + 1 > max_cpus) {
      fail("CPU list '{}': more than {} CPUs", text, max_cpus);
    }
    for (int c = first; c <= last; ++c) out.push_back(c);
    start = comma + 1;
  }
  return out;
}

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (!line.starts_with("model name")) continue;
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    const auto begin = line.find_first_not_of(" \t", colon + 1);
    return begin == std::string::npos ? std::string("unknown") : line.substr(begin);
  }
  return "unknown";
}

MemInfo read_meminfo() {
  MemInfo m;
  std::ifstream in("/proc/meminfo");
  std::string key;
  uint64_t kib = 0;
  std::string unit;
  while (in >> key >> kib) {
    std::getline(in, unit);  // " kB"
    if (key == "MemTotal:") m.total_bytes = kib * 1024;
    if (key == "MemAvailable:") m.available_bytes = kib * 1024;
  }
  if (const auto cg = own_cgroup_memory()) {
    m.cgroup_limit_bytes = cg->limit_bytes;
    m.total_bytes = m.total_bytes > 0 ? std::min(m.total_bytes, cg->limit_bytes) : cg->limit_bytes;
    m.available_bytes = m.available_bytes > 0 ? std::min(m.available_bytes, cg->headroom()) : cg->headroom();
  }
  return m;
}

struct ReadProbe::State {
  explicit State(int n_threads)
      : threads(n_threads), read(loops_for(select_isa(), detect_cpu_features()).read), pool(n_threads) {}
  int threads;
  ReadLoops read;
  ThreadPool pool;
  std::optional<ReadBuffer> buf;
  std::span<const uint64_t> words;
  uint64_t last_xor = 0;
};

ReadProbe::ReadProbe(int threads, uint64_t buffer_bytes) {
  check_options(threads, 1.0);
  state_ = std::make_unique<State>(threads > 0 ? threads : available_cores());
  state_->buf.emplace(buffer_bytes > 0 ? buffer_bytes : default_buffer_bytes(), state_->pool);
  state_->words = state_->buf->words();
}

ReadProbe::ReadProbe(int threads, std::span<const uint8_t> memory) {
  check_options(threads, 1.0);
  // The loops read 64-byte lines: the run starts at the first line boundary inside the memory.
  const auto at = reinterpret_cast<uintptr_t>(memory.data());
  const size_t skip = std::min<size_t>(memory.size(), (64 - at % 64) % 64);
  const size_t words = (memory.size() - skip) / sizeof(uint64_t);
  if (words < probe_kernels::kReadBlockWords) fail("the memory to read is too small: {} bytes", memory.size());
  state_ = std::make_unique<State>(threads > 0 ? threads : available_cores());
  state_->words = read_blocks(reinterpret_cast<const uint64_t*>(memory.data() + skip), words);
}

uint64_t ReadProbe::bytes() const { return state_->words.size() * sizeof(uint64_t); }

uint64_t ReadProbe::last_xor() const { return state_->last_xor; }

ReadProbe::~ReadProbe() = default;

ReadRate ReadProbe::measure(double seconds) {
  check_options(state_->threads, seconds);
  return read_rate(state_->words, state_->pool, state_->threads, state_->read, seconds, &state_->last_xor);
}

ReadRate measure_read(int threads, double seconds, uint64_t buffer_bytes) {
  check_options(threads, seconds);
  return ReadProbe(threads, buffer_bytes).measure(seconds);
}

std::vector<int> online_cpus() {
  std::ifstream in("/sys/devices/system/cpu/online");
  std::string text;
  if (!std::getline(in, text)) return {};
  try {
    return parse_cpu_list(text, CPU_SETSIZE);
  } catch (const Error&) {
    return {};
  }
}

namespace {

// Reads `words` with the caller on its CPU and a pool thread bound to each other CPU of `cpus`.
double machine_rate(std::span<const uint64_t> words, const ReadLoops& loops, std::vector<int> cpus, double seconds) {
  const int own = sched_getcpu();
  std::erase(cpus, own);
  ThreadPool pool(static_cast<int>(cpus.size()) + 1);
  std::vector<int> refused(cpus.size(), -1);
  for (int cpu : cpus) {
    if (cpu < 0 || cpu >= CPU_SETSIZE) fail("the machine's read rate: CPU {} is out of range", cpu);
  }
  pool.run([&](int t) {
    if (t == 0) return;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpus[static_cast<size_t>(t - 1)], &set);
    if (pthread_setaffinity_np(pthread_self(), sizeof set, &set) != 0) refused[static_cast<size_t>(t - 1)] = t - 1;
  });
  for (int i : refused) {
    if (i >= 0) fail("the machine's read rate: CPU {} cannot be used by this process", cpus[static_cast<size_t>(i)]);
  }
  return read_rate(words, pool, pool.size(), loops, seconds).sustained;
}

}  // namespace

double measure_machine_read(double seconds, std::vector<int> cpus, uint64_t buffer_bytes) {
  check_options(1, seconds);
  if (cpus.empty()) cpus = online_cpus();
  if (cpus.empty()) fail("the machine's read rate: its online CPUs cannot be read");
  const ReadLoops loops = loops_for(select_isa(), detect_cpu_features()).read;
  ThreadPool fill(1);
  const ReadBuffer buf(buffer_bytes > 0 ? buffer_bytes : default_buffer_bytes(), fill);
  return machine_rate(buf.words(), loops, std::move(cpus), seconds);
}

ProbeResult probe_node(const ProbeOptions& options) {
  check_options(options.threads, options.seconds);
  ProbeResult r;
  const Isa isa = select_isa();
  const Loops loops = loops_for(isa, detect_cpu_features());
  r.isa = std::string(isa_name(isa));
  r.cores = available_cores();
  r.threads = options.threads > 0 ? options.threads : r.cores;
  r.cpu = cpu_model_name();
  const MemInfo mem = read_meminfo();
  r.mem_total_bytes = mem.total_bytes;
  r.mem_available_bytes = mem.available_bytes;

  const double s = options.seconds;
  ThreadPool pool(r.threads);
  {
    const ReadBuffer buf(options.buffer_bytes > 0 ? options.buffer_bytes : default_buffer_bytes(), pool);
    const ReadRate all = read_rate(buf.words(), pool, r.threads, loops.read, r.threads == 1 ? 0.6 * s : 0.35 * s);
    r.mem_read_gbps = all.sustained;
    r.mem_read_best_gbps = all.best_pass;
    r.mem_read_gbps_1t =
        r.threads == 1 ? all.sustained : read_rate(buf.words(), pool, 1, loops.read, 0.25 * s).sustained;
    // A node with fewer threads than the machine has CPUs may share its memory with another node.
    const std::vector<int> machine = online_cpus();
    r.machine_cpus = static_cast<int>(machine.size());
    if (!options.machine_rate) {
      r.machine_read_gbps = 0;
    } else if (r.machine_cpus <= r.threads) {
      r.machine_read_gbps = r.mem_read_gbps;
    } else {
      try {
        r.machine_read_gbps = machine_rate(buf.words(), loops.read, machine, 0.25 * s);
      } catch (const Error&) {
        r.machine_read_gbps = 0;  // unknown: the planner then divides this node's own rate
      }
    }
  }
  r.int8_gops = best_loop_rate(pool, loops.int8, 0.2 * s) / 1e9;
  r.f32_gflops = best_loop_rate(pool, loops.f32, 0.2 * s) / 1e9;
  // A pass of 256 tokens takes a few milliseconds: a third of a second gives each count three stretches of many.
  r.batch_rates = measure_batch_rates(std::max(0.3, 0.15 * s));
  return r;
}

ProbeResult ProbeCache::get(const ProbeOptions& options, double max_age_s, double& age_s) {
  std::lock_guard lock(mutex_);
  const auto now = std::chrono::steady_clock::now();
  const int threads = options.threads > 0 ? options.threads : available_cores();
  if (last_ && last_->threads == threads && last_->cores == available_cores()) {
    age_s = std::chrono::duration<double>(now - measured_at_).count();
    if (age_s < max_age_s) {
      ProbeResult r = *last_;
      const MemInfo mem = read_meminfo();
      r.mem_total_bytes = mem.total_bytes;
      r.mem_available_bytes = mem.available_bytes;
      return r;
    }
  }
  last_ = probe_node(options);
  measured_at_ = std::chrono::steady_clock::now();
  age_s = 0;
  return *last_;
}

namespace probe_kernels {

uint64_t xor_words_scalar(const uint64_t* p, size_t n) {
  uint64_t a[4] = {0, 0, 0, 0};
  for (size_t i = 0; i < n; i += 4) {
    a[0] ^= p[i];
    a[1] ^= p[i + 1];
    a[2] ^= p[i + 2];
    a[3] ^= p[i + 3];
  }
  return a[0] ^ a[1] ^ a[2] ^ a[3];
}

uint64_t int8_dot_scalar(uint64_t iters) {
  // 8 lanes of 4 u8 x s8 products each, the shape of one 256-bit vpdpbusd, in plain integer arithmetic.
  uint32_t ua = 1;
  int32_t sb = 1;
  uint32_t acc[8] = {};
  for (uint64_t i = 0; i < iters; ++i) {
    asm volatile("" : "+r"(ua), "+r"(sb));
    for (auto& a : acc) {
      for (int j = 0; j < 4; ++j) a += static_cast<uint32_t>(static_cast<int32_t>(ua & 0xff) * static_cast<int8_t>(sb));
    }
  }
  uint64_t s = 0;
  for (uint32_t a : acc) s += a;
  return s;
}

uint64_t f32_fma_scalar(uint64_t iters) {
  float one = 1.0f;
  float acc[8] = {};
  for (uint64_t i = 0; i < iters; ++i) {
    asm volatile("" : "+x"(one));
    for (auto& a : acc) a = a * one + one;
  }
  double s = 0;
  for (float a : acc) s += static_cast<double>(a);
  return static_cast<uint64_t>(s);
}

}  // namespace probe_kernels

}  // namespace tessera
