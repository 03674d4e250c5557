// ThreadPool: every index runs exactly once per job, ranges are covered exactly, errors propagate, and many
// back-to-back short jobs (the decode pattern) neither lose nor repeat work.
#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "util/thread_pool.h"

namespace tessera {
namespace {

TEST(ThreadPool, EachThreadRunsOncePerJob) {
  for (int n : {1, 2, 3, 8}) {
    ThreadPool pool(n);
    std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
    pool.run([&](int t) { hits[static_cast<size_t>(t)].fetch_add(1); });
    for (auto& h : hits) EXPECT_EQ(h.load(), 1);
  }
}

// A job is the caller's callable itself, not a copy: every thread sees the one object (a std::function would have
// copied it, to the heap past two captures), and a callable that cannot be copied runs.
TEST(ThreadPool, RunsTheCallersCallableWithoutCopyingIt) {
  struct Callable {
    std::vector<std::atomic<const void*>>* seen;
    explicit Callable(std::vector<std::atomic<const void*>>* s) : seen(s) {}
    Callable(const Callable&) = delete;
    Callable& operator=(const Callable&) = delete;
    void operator()(int t) const { (*seen)[static_cast<size_t>(t)].store(this); }
  };
  for (int n : {1, 2, 4}) {
    ThreadPool pool(n);
    std::vector<std::atomic<const void*>> seen(static_cast<size_t>(n));
    const Callable callable(&seen);
    pool.run(callable);
    for (auto& s : seen) EXPECT_EQ(s.load(), &callable);
  }
}

std::vector<int> cpus_of_this_thread() {
  cpu_set_t set;
  CPU_ZERO(&set);
  EXPECT_EQ(pthread_getaffinity_np(pthread_self(), sizeof set, &set), 0);
  std::vector<int> cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
  }
  return cpus;
}

// --pin: worker i on the i-th allowed CPU alone (wrapping around); the caller, and so every thread it starts later,
// keeps its CPUs.
TEST(ThreadPool, PinBindsEachWorkerToItsOwnCpuAndLeavesTheCallerFree) {
  const std::vector<int> before = cpus_of_this_thread();
  ASSERT_FALSE(before.empty());
  for (int n : {1, 2, 3}) {
    ThreadPool pool(n, true);
    std::vector<std::vector<int>> seen(static_cast<size_t>(n));
    for (int round = 0; round < 2; ++round) {
      pool.run([&](int t) { seen[static_cast<size_t>(t)] = cpus_of_this_thread(); });
      EXPECT_EQ(seen[0], before) << "the caller, " << n << " threads";
      for (int t = 1; t < n; ++t) {
        EXPECT_EQ(seen[static_cast<size_t>(t)], std::vector<int>{before[static_cast<size_t>(t) % before.size()]})
            << "thread " << t << " of " << n;
      }
    }
    // What the bench's probe does while the compute pool lives: a pool started afterwards on the same thread.
    ThreadPool later(2);
    std::vector<std::vector<int>> later_seen(2);
    later.run([&](int t) { later_seen[static_cast<size_t>(t)] = cpus_of_this_thread(); });
    for (const auto& s : later_seen) EXPECT_EQ(s, before) << "a pool started after a pinned one, " << n << " threads";
  }
  EXPECT_EQ(cpus_of_this_thread(), before);
  ThreadPool unpinned(2);
  std::vector<std::vector<int>> seen(2);
  unpinned.run([&](int t) { seen[static_cast<size_t>(t)] = cpus_of_this_thread(); });
  for (const auto& s : seen) EXPECT_EQ(s, before);
}

// How often thread `tid` of this process has gone to sleep so far (its voluntary context switches).
long voluntary_switches(long tid) {
  std::ifstream status("/proc/self/task/" + std::to_string(tid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("voluntary_ctxt_switches:", 0) == 0) return std::stol(line.substr(line.find(':') + 1));
  }
  ADD_FAILURE() << "no voluntary_ctxt_switches for thread " << tid;
  return 0;
}

// A pool's sleeping workers wake for its own jobs only. With std::atomic<uint64_t>::wait every pool's workers slept
// on one word shared by the process, and each job of any pool woke them all: the bench's decode woke its probe's
// idle thread ~90 times a token, and the two took turns on the cores.
TEST(ThreadPool, ASleepingPoolSleepsThroughAnotherPoolsJobs) {
  ThreadPool sleeping(2);
  std::atomic<long> worker{0};
  sleeping.run([&](int t) {
    if (t == 1) worker = syscall(SYS_gettid);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // far past its spin: asleep
  const long before = voluntary_switches(worker);
  {
    ThreadPool busy(2);
    // Bursts apart: each would find the other pool's worker asleep again (busy's own worker sleeps between them).
    for (int burst = 0; burst < 20; ++burst) {
      for (int i = 0; i < 100; ++i) busy.run([](int) {});
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }
  EXPECT_LE(voluntary_switches(worker) - before, 2);
  int runs = 0;
  sleeping.run([&](int t) {
    if (t == 1) ++runs;
  });
  EXPECT_EQ(runs, 1) << "the sleeping pool still runs its own jobs";
}

// Jobs that find the workers asleep (gaps past their spin) and callers that fall asleep waiting for them (a
// worker slower than the caller's spin): a wake-up lost on either side would hang here.
TEST(ThreadPool, EveryJobRunsAcrossSleepsOnBothSides) {
  ThreadPool pool(3);
  std::atomic<int64_t> total{0};
  for (int i = 0; i < 300; ++i) {
    if (i % 3 == 0) std::this_thread::sleep_for(std::chrono::microseconds(100 + 37 * (i % 5)));
    pool.run([&](int t) {
      if (t == 2 && i % 4 == 1) std::this_thread::sleep_for(std::chrono::microseconds(150));
      total.fetch_add(t + 1);
    });
  }
  EXPECT_EQ(total.load(), 300 * (1 + 2 + 3));
}

TEST(ThreadPool, ParallelForCoversTheRangeExactlyOnce) {
  ThreadPool pool(3);
  for (int64_t n : {0, 1, 2, 3, 10, 1001}) {
    std::vector<std::atomic<int>> seen(static_cast<size_t>(n));
    pool.parallel_for(n, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) seen[static_cast<size_t>(i)].fetch_add(1);
    });
    for (auto& s : seen) EXPECT_EQ(s.load(), 1);
  }
}

TEST(ThreadPool, ManyShortJobsBackToBack) {
  ThreadPool pool(2);
  std::atomic<int64_t> total{0};
  for (int i = 0; i < 20000; ++i) pool.run([&](int t) { total.fetch_add(t + 1); });
  EXPECT_EQ(total.load(), 20000 * (1 + 2));
}

TEST(ThreadPool, ExceptionsReachTheCaller) {
  ThreadPool pool(3);
  EXPECT_THROW(pool.run([](int t) {
    if (t == 2) throw std::runtime_error("worker failed");
  }),
               std::runtime_error);
  EXPECT_THROW(pool.run([](int t) {
    if (t == 0) throw std::runtime_error("caller failed");
  }),
               std::runtime_error);
  // The pool still works afterwards.
  std::atomic<int> n{0};
  pool.run([&](int) { n.fetch_add(1); });
  EXPECT_EQ(n.load(), 3);
}

TEST(ThreadPool, SleepingWorkersWakeUp) {
  ThreadPool pool(2);
  std::atomic<int> n{0};
  pool.run([&](int) { n.fetch_add(1); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // long enough for workers to stop spinning
  pool.run([&](int) { n.fetch_add(1); });
  EXPECT_EQ(n.load(), 4);
}

// A worker reads its region ahead a line at a time and looks for the next job between lines: with regions far
// longer than any wait (2^40 bytes; prefetches of unmapped addresses are dropped by the CPU, never fault) every
// later job still runs, and the pool still shuts down.
TEST(ThreadPool, ReadAheadDoesNotHoldUpTheNextJob) {
  std::vector<char> buffer(4096);
  ThreadPool pool(3);
  const std::vector<ThreadPool::ReadAhead> ahead(3, {buffer.data(), size_t{1} << 40});
  std::atomic<int> n{0};
  pool.run([&](int) { n.fetch_add(1); }, ahead);
  for (int i = 0; i < 1000; ++i) pool.run([&](int) { n.fetch_add(1); });
  pool.run([&](int) { n.fetch_add(1); }, ahead);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // workers deep in their regions
  pool.run([&](int) { n.fetch_add(1); });
  EXPECT_EQ(n.load(), 1003 * 3);
}

TEST(ThreadPool, ReadAheadNeedsOneRegionPerThread) {
  ThreadPool pool(2);
  const std::vector<ThreadPool::ReadAhead> three(3);
  int calls = 0;
  EXPECT_THROW(pool.run([&](int) { ++calls; }, three), std::invalid_argument);
  EXPECT_EQ(calls, 0);
}

}  // namespace
}  // namespace tessera
