// How a prompt is cut into pipeline micro-batches when the user gives no size: from what each stage measured a
// batch to cost (Stage::time_batches at load), the cut whose predicted prefill time is the shortest.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "model/batch.h"

namespace tessera::cluster {

// The batch sizes every stage times at load, and how often (the fastest of the rounds counts: with fewer rounds
// a noisy VM's outlier picked a poor cut; docs/perf-log/pipeline.md).
inline constexpr int64_t kTimedBatchTokens[] = {16, 32, 64, 128};
inline constexpr int kBatchTimingRounds = 5;
inline constexpr double kBatchTimingBudgetSeconds = 2.0;  // no further round after this (big models: one round)

// n tokens in chunks of m (the last one shorter), the first and the last `end` tokens long when end > 0.
std::vector<int64_t> cut_prompt(int64_t n, int64_t m, int64_t end);

// A stage's time for `tokens` tokens from its measured sizes: linear between two of them, at the nearest one's
// per-token cost outside them. `times` is sorted by tokens and not empty.
double batch_seconds(std::span<const BatchTime> times, int64_t tokens);

// The time until the last chunk leaves the last stage when the chunks enter the first stage back to back and
// each stage takes its chunks in order (a flow shop), with each stage's measured times; links are left out.
double predicted_prefill_seconds(std::span<const int64_t> chunks, std::span<const std::vector<BatchTime>> stages);

// The fastest predicted cut of n tokens among `rule` (the automatic rule's own cut) and, for each measured size m,
// chunks of m and chunks of m with the first and the last halved. A cut within 1% of the fastest but with fewer
// chunks is preferred: every chunk also costs messages the prediction leaves out. `rule` when a stage has no times.
std::vector<int64_t> fastest_prompt_chunks(int64_t n, std::span<const std::vector<BatchTime>> stages,
                                           std::vector<int64_t> rule);

// "16: 310, 32: 420, 64: 450, 128: 470": tokens per second at each measured size; "-" when none were measured.
std::string describe_batch_times(std::span<const BatchTime> times);
// Runs of equal sizes: "32, 7 x 64, 32".
std::string describe_chunks(std::span<const int64_t> chunks);

}  // namespace tessera::cluster
