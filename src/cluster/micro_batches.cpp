// Choosing a prompt's micro-batches from the stages' measured batch times: each candidate cut is run through the
// flow-shop recurrence, and the shortest wins.
#include "cluster/micro_batches.h"

#include <fmt/format.h>

#include <algorithm>

#include "util/error.h"
#include "util/flow_shop.h"

namespace tessera::cluster {

std::vector<int64_t> cut_prompt(int64_t n, int64_t m, int64_t end) {
  std::vector<int64_t> sizes;
  int64_t left = n - 2 * end;
  if (end > 0) sizes.push_back(end);
  for (; left > 0; left -= sizes.back()) sizes.push_back(std::min(m, left));
  if (end > 0) sizes.push_back(end);
  return sizes;
}

double batch_seconds(std::span<const BatchTime> times, int64_t tokens) {
  if (times.empty()) fail("no measured batch times to predict from");
  const auto t = static_cast<double>(tokens);
  const BatchTime& first = times.front();
  const BatchTime& last = times.back();
  if (tokens <= first.tokens) return first.seconds * t / static_cast<double>(first.tokens);
  if (tokens >= last.tokens) return last.seconds * t / static_cast<double>(last.tokens);
  const auto hi = std::find_if(times.begin(), times.end(), [&](const BatchTime& b) { return b.tokens >= tokens; });
  const auto lo = hi - 1;
  const double f = (t - static_cast<double>(lo->tokens)) / static_cast<double>(hi->tokens - lo->tokens);
  return lo->seconds + f * (hi->seconds - lo->seconds);
}

double predicted_prefill_seconds(std::span<const int64_t> chunks, std::span<const std::vector<BatchTime>> stages) {
  const auto stage_time = [&](int64_t c, size_t s) { return batch_seconds(stages[s], chunks[static_cast<size_t>(c)]); };
  return flow_shop_makespan(static_cast<int64_t>(chunks.size()), stages.size(), stage_time, stage_time);
}

std::vector<int64_t> fastest_prompt_chunks(int64_t n, std::span<const std::vector<BatchTime>> stages,
                                           std::vector<int64_t> rule) {
  if (n <= 0 || stages.empty()) return rule;
  for (const auto& times : stages) {
    if (times.empty()) return rule;
  }
  std::vector<std::vector<int64_t>> candidates{std::move(rule)};
  const int64_t smallest = stages.front().front().tokens;
  for (const BatchTime& b : stages.front()) {
    if (b.tokens >= n) continue;
    candidates.push_back(cut_prompt(n, b.tokens, 0));
    if (b.tokens / 2 >= smallest && n >= 3 * b.tokens) candidates.push_back(cut_prompt(n, b.tokens, b.tokens / 2));
  }
  std::vector<double> predicted;
  for (const auto& c : candidates) predicted.push_back(predicted_prefill_seconds(c, stages));
  const double best = *std::min_element(predicted.begin(), predicted.end());
  size_t pick = 0;
  for (size_t i = 0; i < candidates.size(); ++i) {
    const bool close = predicted[i] <= 1.01 * best;
    if (close && (predicted[pick] > 1.01 * best || candidates[i].size() < candidates[pick].size())) pick = i;
  }
  return candidates[pick];
}

std::string describe_batch_times(std::span<const BatchTime> times) {
  std::string out;
  for (const BatchTime& t : times) {
    if (!out.empty()) out += ", ";
    out += t.seconds > 0 ? fmt::format("{}: {:.0f}", t.tokens, static_cast<double>(t.tokens) / t.seconds)
                         : fmt::format("{}: -", t.tokens);
  }
  return out.empty() ? "-" : out;
}

std::string describe_chunks(std::span<const int64_t> chunks) {
  std::string out;
  for (size_t i = 0; i < chunks.size();) {
    size_t j = i;
    while (j < chunks.size() && chunks[j] == chunks[i]) ++j;
    if (!out.empty()) out += ", ";
    out += j - i > 1 ? fmt::format("{} x {}", j - i, chunks[i]) : fmt::format("{}", chunks[i]);
    i = j;
  }
  return out;
}

}  // namespace tessera::cluster
