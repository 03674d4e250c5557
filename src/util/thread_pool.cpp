// ThreadPool: a job is published by bumping an atomic generation; workers spin (with a pause hint) for a few
// tens of microseconds, then block in a futex wait (std::atomic::wait). The caller waits for completion the same
// way, so an oversubscribed machine degrades to sleeping instead of burning time slices.
#include "util/thread_pool.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
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

// Spins until value != old or the spin budget runs out, then blocks until it changes. While it spins it reads
// `ahead` into the cache a line at a time (those lines do not count against the budget), checking for the change
// between lines, so a new job starts as soon as it would without them.
template <typename T>
T wait_change(const std::atomic<T>& value, T old, ThreadPool::ReadAhead* ahead = nullptr) {
  for (int i = 0; i < kSpinIterations;) {
    const T now = value.load(std::memory_order_acquire);
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
  T now = value.load(std::memory_order_acquire);
  while (now == old) {
    value.wait(old, std::memory_order_acquire);
    now = value.load(std::memory_order_acquire);
  }
  return now;
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

void bind_to(std::thread::native_handle_type handle, std::span<const int> cpus) {
  if (cpus.empty()) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int cpu : cpus) CPU_SET(cpu, &set);
  pthread_setaffinity_np(handle, sizeof set, &set);
}

void pin_to_cpu(std::thread::native_handle_type handle, const std::vector<int>& cpus, int index) {
  if (cpus.empty()) return;
  const int one = cpus[static_cast<size_t>(index) % cpus.size()];
  bind_to(handle, {&one, 1});
}

}  // namespace

ThreadPool::ThreadPool(int n_threads, bool pin) : n_threads_(std::max(1, n_threads)) {
  if (pin) cpus_ = allowed_cpus();
  for (int i = 1; i < n_threads_; ++i) {
    workers_.emplace_back([this, i] { worker(i); });
    pin_to_cpu(workers_.back().native_handle(), cpus_, i);
  }
}

void ThreadPool::pin_caller() {
  caller_pinned_ = true;
  caller_ = std::this_thread::get_id();
  caller_cpus_ = allowed_cpus();
  pin_to_cpu(pthread_self(), cpus_, 0);
}

ThreadPool::~ThreadPool() {
  stopping_.store(true, std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  generation_.notify_all();
  for (auto& t : workers_) t.join();
  if (caller_pinned_ && std::this_thread::get_id() == caller_) bind_to(pthread_self(), caller_cpus_);
}

void ThreadPool::worker(int index) {
  uint64_t seen = 0;
  ReadAhead ahead;
  for (;;) {
    seen = wait_change(generation_, seen, &ahead);
    if (stopping_.load(std::memory_order_acquire)) return;
    // Copied before the job ends: the caller may publish the next job's regions once every worker is done.
    if (!ahead_.empty()) ahead = ahead_[static_cast<size_t>(index)];
    try {
      job_(index);
    } catch (...) {
      std::lock_guard lock(error_mutex_);
      if (!error_) error_ = std::current_exception();
    }
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) pending_.notify_one();
  }
}

void ThreadPool::run(Job fn) { run(fn, {}); }

void ThreadPool::run(Job fn, std::span<const ReadAhead> ahead) {
  if (!cpus_.empty() && !caller_pinned_) pin_caller();
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
  pending_.store(n_threads_ - 1, std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  generation_.notify_all();
  std::exception_ptr own_error;
  try {
    fn(0);
  } catch (...) {
    own_error = std::current_exception();
  }
  for (int left = pending_.load(std::memory_order_acquire); left != 0;) left = wait_change(pending_, left);
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
  // tokens did three quarters of the work of a 2-thread prefill.
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
