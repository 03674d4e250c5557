// Deadlines for a stage's steps: a step that takes more than factor x its expected time plus slack is a fault
// (a hung or stopped worker), so the head stops waiting for it and recovers.
#pragma once

#include <cstddef>
#include <deque>

namespace tessera::cluster {

struct DeadlineOptions {
  double factor = 4.0;         // k in k x expected + slack
  double slack_seconds = 2.0;  // covers links, scheduling noise and the small steps a median hides
  // Until min_samples steps were seen, no step is a fault before this: loading, warm-up and first steps vary.
  double startup_seconds = 30.0;
  size_t min_samples = 4;
  size_t window = 63;  // the median is over this many recent steps
};

class StepDeadline {
 public:
  explicit StepDeadline(DeadlineOptions options = {}) : options_(options) {}

  // A step the stage completed, in seconds from when it could start (the previous one done) to its result.
  void observe(double seconds);
  size_t samples() const { return recent_.size(); }
  // The median of the recent steps (0 before any).
  double median() const;
  // What a step is expected to take: the larger of the recent median and `predicted` (from the stage's measured
  // batch times for its size; 0 when unknown), so a long prompt after many short decode steps is not a fault.
  double expected(double predicted) const;
  // How long the step may take before it is a fault.
  double limit(double predicted) const;
  const DeadlineOptions& options() const { return options_; }

 private:
  DeadlineOptions options_;
  std::deque<double> recent_;
};

}  // namespace tessera::cluster
