// bench --check-plan under mpirun --tp/--ep, for generation tests: measured per token = rank 0's own shard + its
// collectives (BenchTiming::collectives, waiting for the other ranks included), against the planner's slowest shard
// + collectives.
#pragma once

#include <optional>
#include <string>

#include "engine/benchmark.h"
#include "plan/planner.h"

namespace tessera {

// "tensor parallel x2 tg64: measured 11.15 ms per token = 9.67 ms in rank 0's shard + 1.48 ms in collectives;
// predicted 13.91 ms = 13.64 ms slowest shard + 0.27 ms collectives", or nothing for a test it does not apply to (a
// prompt or several sequences). Under --pp: "your --tp 2 --pp 2 tg64: measured ... = ... in rank 0's shard + ... in
// collectives + ... waiting for the stage before; predicted ... = ... the last stage's slowest shard + ... its
// collectives + ... the stages before and the hops".
std::optional<std::string> parallel_check_arithmetic(const plan::Strategy& s, const BenchResult& r);

}  // namespace tessera
