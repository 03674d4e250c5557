// bench under mpirun --tp/--ep: the seconds rank 0 spends in collectives inside each test's timed runs, and the
// check-plan arithmetic for generation tests: measured per token = rank 0's own shard + its collectives (waiting for
// the other ranks included), against the planner's slowest shard + collectives.
#pragma once

#include <optional>
#include <string>

#include "engine/benchmark.h"
#include "plan/planner.h"

namespace tessera {

class CollectiveMeter {
 public:
  // A WireCounter for run_benchmarks: the bytes this rank sent into collectives (nullopt without a communicator),
  // noting the collectives' seconds between the calls that bracket each timed run.
  WireCounter counter();
  // The seconds noted since the last take(): those of the test that has just finished.
  double take();

 private:
  bool checked_ = false;  // run_benchmarks asks once per executor whether it counts, before any test
  std::optional<double> start_;
  double timed_ = 0;
};

// "tensor parallel x2 tg64: measured 11.15 ms per token = 9.67 ms in rank 0's shard + 1.48 ms in collectives;
// predicted 13.91 ms = 13.64 ms slowest shard + 0.27 ms collectives", or nothing for a test it does not apply to (a
// prompt or several sequences).
std::optional<std::string> parallel_check_arithmetic(const plan::Strategy& s, const BenchResult& r,
                                                     double collective_seconds);

}  // namespace tessera
