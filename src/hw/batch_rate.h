// The quantized matmul's rate by tokens per pass on this machine's kernels, for the planner's prompt micro-batches
// and batched decode: how fast a 16- or 64-token pass runs against a full one differs from CPU to CPU (the
// development VM's Xeon ran 16 tokens at 0.58 of the 512-token rate, a Zen 5 at 0.87-1.0), so it is measured, not
// assumed.
#pragma once

#include <vector>

namespace tessera {

struct BatchRate {
  int tokens = 0;
  double fraction = 0;  // this many tokens' rate (tokens/s) over the largest measured count's
};

// The token counts measured, ascending; the last is the full rate's.
inline constexpr int kBatchRateTokens[] = {8, 16, 32, 64, 128, 256};

// Times the engine's own matmul (Q4_K weights, with the panels a load writes where this path has them) on one
// thread over a matrix small enough to stay in cache, so that the figures are the kernels' compute, not the
// memory's; about `seconds` in all. One entry per kBatchRateTokens, or none on the scalar path or when it takes
// more than twice `seconds` (the planner then keeps its constants).
std::vector<BatchRate> measure_batch_rates(double seconds);

}  // namespace tessera
