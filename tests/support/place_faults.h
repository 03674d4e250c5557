// The --place fault tests' shared check: a bench over a --place layout whose worker is killed mid-run, with
// --recovery-timeout 0, ends within seconds with an error naming that worker.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <string>
#include <thread>

#include "support/background_process.h"
#include "support/worker_group.h"

namespace tessera::test {

// Kills w.workers[victim] (named `name` in w.list()) 1.5 s into a bench of stories260K over `place`.
inline void expect_killed_worker_named(WorkerGroup& w, const std::string& place, size_t victim,
                                       const std::string& name) {
  using namespace std::chrono_literals;
  const std::string address = w.workers[victim]->address();
  Background head({"bench",
                   "-m",
                   stories().string(),
                   "-p",
                   "0",
                   "-n",
                   "64",
                   "-r",
                   "100000",
                   "-t",
                   "1",
                   "--workers",
                   w.list(),
                   "--place",
                   place,
                   "--key-file",
                   w.key,
                   "--no-plan",
                   "--collective-timeout",
                   "5",
                   "--recovery-timeout",
                   "0"});
  ASSERT_TRUE(head.wait_for("pipeline: ", 60s)) << head.output();
  std::this_thread::sleep_for(1500ms);
  const auto start = std::chrono::steady_clock::now();
  kill(w.workers[victim]->pid(), SIGKILL);
  const int code = head.wait_exit(30s);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_NE(code, 0) << head.output();
  EXPECT_NE(code, -1) << "the head did not end: " << head.output();
  EXPECT_LT(seconds, 10.0) << head.output();
  EXPECT_NE(head.output().find(name + " (" + address + ")"), std::string::npos) << head.output();
}

}  // namespace tessera::test
