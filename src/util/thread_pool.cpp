// ThreadPool: a job is published by bumping an atomic generation; workers spin (with a pause hint) for a few
// tens of microseconds, then sleep in a futex wait. The caller waits for completion the same way, so an
// oversubscribed machine degrades to sleeping instead of burning time slices.
#include "util/thread_pool.h"

#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <stdexcept>

namespace tessera {
namespace {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#else
  std::this_thread::yield();
#endif
}

constexpr int kSpinIterations = 2000;  // tens of microseconds of pause instructions before blocking

constexpr size_t kLine = 64;

static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t) && std::atomic<uint32_t>::is_always_lock_free);

// The futex system call on the pool's own 32-bit words. std::atomic<uint64_t>::wait parks every such waiter of the
// process whose address hashes alike (any 64-byte aligned one) on one shared word, which each notify_all wakes:
// every job of the bench's decode pool woke the probe pool's sleeping thread, which then took turns with the
// compute threads on the cores (docs/perf-log/threads.md).
void futex_wait(const std::atomic<uint32_t>& word, uint32_t old) {
  syscall(SYS_futex, reinterpret_cast<const uint32_t*>(&word), FUTEX_WAIT_PRIVATE, old, nullptr, nullptr, 0);
}

// Wakes the threads asleep on `word` after a change to it, if there are any: a run whose threads all spin makes
// no system call. The change and this check are sequentially consistent, and so are wait_change's count and its
// check before sleeping: of the two threads, at least one sees the other's write.
void wake(std::atomic<uint32_t>& word, const std::atomic<uint32_t>& sleepers) {
  if (sleepers.load(std::memory_order_seq_cst) == 0) return;
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAKE_PRIVATE, INT_MAX, nullptr, nullptr, 0);
}

// Spins until word != old or the spin budget runs out, then sleeps until it changes (counted in `sleepers` for
// wake). While it spins it reads `ahead` into the cache a line at a time (those lines do not count against the
// budget), checking for the change between lines, so a new job starts as soon as it would without them.
uint32_t wait_change(const std::atomic<uint32_t>& word, uint32_t old, std::atomic<uint32_t>& sleepers,
                     ThreadPool::ReadAhead* ahead = nullptr) {
  for (int i = 0; i < kSpinIterations;) {
    const uint32_t now = word.load(std::memory_order_acquire);
    if (now != old) return now;
    if (ahead != nullptr && ahead->bytes > 0) {
      __builtin_prefetch(ahead->data, 0, 2);
      const size_t step = std::min(ahead->bytes, kLine);
      ahead->data = static_cast<const char*>(ahead->data) + step;
      ahead->bytes -= step;
      continue;
    }
    cpu_relax();
    ++i;
  }
  for (;;) {
    sleepers.fetch_add(1, std::memory_order_seq_cst);
    uint32_t now = word.load(std::memory_order_seq_cst);
    if (now == old) {
      futex_wait(word, old);  // returns at once if the word no longer holds old
      now = word.load(std::memory_order_acquire);
    }
    sleepers.fetch_sub(1, std::memory_order_relaxed);
    if (now != old) return now;
  }
}

// The CPUs the calling thread may run on, in order (empty if the system does not say).
std::vector<int> allowed_cpus() {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  std::vector<int> cpus;
  if (pthread_getaffinity_np(pthread_self(), sizeof allowed, &allowed) != 0) return cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &allowed)) cpus.push_back(cpu);
  }
  return cpus;
}

void pin_to_cpu(std::thread::native_handle_type handle, const std::vector<int>& cpus, int index) {
  if (cpus.empty()) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpus[static_cast<size_t>(index) % cpus.size()], &set);
  pthread_setaffinity_np(handle, sizeof set, &set);
}

}  // namespace

ThreadPool::ThreadPool(int n_threads, bool pin) : n_threads_(std::max(1, n_threads)) {
  const std::vector<int> cpus = pin ? allowed_cpus() : std::vector<int>{};
  for (int i = 1; i < n_threads_; ++i) {
    workers_.emplace_back([this, i] { worker(i); });
    pin_to_cpu(workers_.back().native_handle(), cpus, i);
  }
}

ThreadPool::~ThreadPool() {
  stopping_.store(true, std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_seq_cst);
  wake(generation_, generation_sleepers_);
  for (auto& t : workers_) t.join();
}

void ThreadPool::worker(int index) {
  uint32_t seen = 0;
  ReadAhead ahead;
  for (;;) {
    seen = wait_change(generation_, seen, generation_sleepers_, &ahead);
    if (stopping_.load(std::memory_order_acquire)) return;
    // Copied before the job ends: the caller may publish the next job's regions once every worker is done.
    if (!ahead_.empty()) ahead = ahead_[static_cast<size_t>(index)];
    try {
      job_(index);
    } catch (...) {
      std::lock_guard lock(error_mutex_);
      if (!error_) error_ = std::current_exception();
    }
    if (pending_.fetch_sub(1, std::memory_order_seq_cst) == 1) wake(pending_, pending_sleepers_);
  }
}

void ThreadPool::run(Job fn) { run(fn, {}); }

void ThreadPool::run(Job fn, std::span<const ReadAhead> ahead) {
  if (n_threads_ == 1) {
    fn(0);
    return;
  }
  if (!ahead.empty() && ahead.size() != static_cast<size_t>(n_threads_)) {
    throw std::invalid_argument("ThreadPool::run: one read-ahead region per thread");
  }
  job_ = fn;
  ahead_ = ahead;
  error_ = nullptr;
  pending_.store(static_cast<uint32_t>(n_threads_ - 1), std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_seq_cst);
  wake(generation_, generation_sleepers_);
  std::exception_ptr own_error;
  try {
    fn(0);
  } catch (...) {
    own_error = std::current_exception();
  }
  for (uint32_t left = pending_.load(std::memory_order_acquire); left != 0;) {
    left = wait_change(pending_, left, pending_sleepers_);
  }
  job_ = Job();
  ahead_ = {};
  if (own_error) std::rethrow_exception(own_error);
  if (error_) std::rethrow_exception(error_);
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  const int64_t threads = std::min<int64_t>(n_threads_, n);
  if (threads == 1) {
    fn(0, n);
    return;
  }
  // Causal attention is the case in point: with one contiguous range per thread, the thread holding the last
  // tokens would do most of the work.
  const int64_t grain = std::max<int64_t>(1, n / (threads * 8));
  std::atomic<int64_t> next{0};
  run([&](int) {
    for (int64_t b = next.fetch_add(grain, std::memory_order_relaxed); b < n;
         b = next.fetch_add(grain, std::memory_order_relaxed)) {
      fn(b, std::min(n, b + grain));
    }
  });
}

}  // namespace tessera
