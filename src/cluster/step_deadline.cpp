// StepDeadline: a running median over a window of recent step times, and the limit derived from it.
#include "cluster/step_deadline.h"

#include <algorithm>
#include <vector>

namespace tessera::cluster {

void StepDeadline::observe(double seconds) {
  recent_.push_back(std::max(0.0, seconds));
  while (recent_.size() > std::max<size_t>(1, options_.window)) recent_.pop_front();
}

double StepDeadline::median() const {
  if (recent_.empty()) return 0;
  std::vector<double> v(recent_.begin(), recent_.end());
  const auto mid = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2);
  std::nth_element(v.begin(), mid, v.end());
  if (v.size() % 2 == 1) return *mid;
  // Even count: the mean of the two middle values.
  const double upper = *mid;
  const double lower = *std::max_element(v.begin(), mid);
  return (lower + upper) / 2;
}

double StepDeadline::expected(double predicted) const { return std::max(median(), std::max(0.0, predicted)); }

double StepDeadline::limit(double predicted) const {
  const double l = options_.factor * expected(predicted) + options_.slack_seconds;
  return recent_.size() < options_.min_samples ? std::max(l, options_.startup_seconds) : l;
}

}  // namespace tessera::cluster
