// A fixed pool of worker threads owned by whoever computes (`-t N`); the calling thread works too.
// Per-token work is short (tens of microseconds per matmul), so workers spin briefly on an atomic job counter
// before blocking: a futex wake-up per matmul would cost more than the matmul.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <thread>
#include <type_traits>
#include <vector>

namespace tessera {

class ThreadPool {
 public:
  // Memory a thread reads into its cache while it waits for the next job: the weights it will take first.
  struct ReadAhead {
    const void* data = nullptr;
    size_t bytes = 0;
  };

  // n_threads counts the caller: ThreadPool(1) starts no threads. pin: bind worker i (1 <= i < n_threads) to the
  // i-th of the CPUs this process may use (wrapping around), leaving the caller's own (thread 0's) alone: a thread
  // inherits its creator's CPUs, so a caller bound to one CPU would put every thread it starts later there too (the
  // bench's bandwidth probe read at half speed, sharing the caller's CPU).
  explicit ThreadPool(int n_threads, bool pin = false);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // A callable taken by reference for one run (no copy, no allocation): a worker starting a job reads the caller's
  // callable itself, where a std::function sent it through the wrapper and, past two captures, a heap copy: each a
  // cross-core miss waiting for the one before (docs/perf-log/threads.md).
  class Job {
   public:
    template <class F>
    requires(!std::is_same_v<std::remove_cvref_t<F>, Job>)
        Job(F&& f)  // NOLINT(google-explicit-constructor): lambdas convert where a run takes a Job
        : obj_(std::addressof(f)),
          call_([](const void* o, int thread) { (*static_cast<const std::remove_reference_t<F>*>(o))(thread); }) {}
    Job() = default;
    void operator()(int thread) const { call_(obj_, thread); }

   private:
    const void* obj_ = nullptr;
    void (*call_)(const void*, int) = nullptr;
  };

  // Calls fn(thread_index) once on each of the size() threads and waits for all; rethrows the first exception.
  void run(Job fn);
  // As run; then each worker thread t (not the caller, who goes on with the work between jobs) pulls ahead[t] into
  // its cache while it waits for the next job. An empty ahead keeps what the workers had left to read.
  void run(Job fn, std::span<const ReadAhead> ahead);

  // Covers [0, n) with calls fn(begin, end) on consecutive ranges that the threads take from a shared counter
  // (about eight per thread), so items of unequal cost, or a thread slowed by other work, still finish together.
  // A thread may run several ranges; fn must not rely on one call per thread.
  void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn);

 private:
  void worker(int index);

  int n_threads_;
  std::vector<std::thread> workers_;
  // The job and its generation on one line: a worker that sees the new generation has the job with it. Each word
  // threads wait on has a count of those asleep on it (thread_pool.cpp's wake).
  alignas(64) std::atomic<uint32_t> generation_{0};
  std::atomic<uint32_t> generation_sleepers_{0};
  Job job_;
  std::atomic<uint32_t> pending_{0};
  std::atomic<uint32_t> pending_sleepers_{0};
  std::atomic<bool> stopping_{false};
  std::span<const ReadAhead> ahead_;
  std::mutex error_mutex_;
  std::exception_ptr error_;
};

}  // namespace tessera
