// The step deadline's arithmetic: the running median over a window, the larger of it and the prediction, k x that
// plus slack, and the generous floor until enough steps were seen.
#include <gtest/gtest.h>

#include "cluster/step_deadline.h"

namespace tessera::cluster {
namespace {

DeadlineOptions opts(double factor, double slack, double startup, size_t min_samples, size_t window) {
  DeadlineOptions o;
  o.factor = factor;
  o.slack_seconds = slack;
  o.startup_seconds = startup;
  o.min_samples = min_samples;
  o.window = window;
  return o;
}

TEST(StepDeadline, StartupFloorUntilEnoughSteps) {
  StepDeadline d(opts(4, 0.5, 30, 3, 63));
  EXPECT_DOUBLE_EQ(d.median(), 0);
  EXPECT_DOUBLE_EQ(d.limit(0), 30);     // nothing seen: the floor
  EXPECT_DOUBLE_EQ(d.limit(10), 40.5);  // a prediction above the floor still counts
  d.observe(0.1);
  d.observe(0.1);
  EXPECT_DOUBLE_EQ(d.limit(0), 30);
  d.observe(0.1);
  EXPECT_DOUBLE_EQ(d.limit(0), 4 * 0.1 + 0.5);  // three steps: the floor is gone
}

TEST(StepDeadline, MedianIgnoresOutliersAndFollowsTheWindow) {
  StepDeadline d(opts(2, 1, 0, 1, 5));
  for (double s : {0.01, 0.02, 5.0, 0.03, 0.02}) d.observe(s);
  EXPECT_DOUBLE_EQ(d.median(), 0.02);  // the one slow step does not move it
  EXPECT_DOUBLE_EQ(d.limit(0), 2 * 0.02 + 1);
  // Five slower steps push every earlier one out of the window.
  for (int i = 0; i < 5; ++i) d.observe(0.5);
  EXPECT_EQ(d.samples(), 5u);
  EXPECT_DOUBLE_EQ(d.median(), 0.5);
  d.observe(0.1);
  d.observe(0.3);
  EXPECT_DOUBLE_EQ(d.median(), 0.5);  // 0.1, 0.3, 0.5, 0.5, 0.5
}

TEST(StepDeadline, EvenCountTakesTheMeanOfTheMiddleTwo) {
  StepDeadline d(opts(1, 0, 0, 1, 10));
  for (double s : {0.4, 0.1, 0.3, 0.2}) d.observe(s);
  EXPECT_DOUBLE_EQ(d.median(), 0.25);
}

TEST(StepDeadline, ThePredictionWinsForALongStepAfterShortOnes) {
  StepDeadline d(opts(3, 0.25, 0, 1, 63));
  for (int i = 0; i < 20; ++i) d.observe(0.002);
  EXPECT_DOUBLE_EQ(d.expected(0.0), 0.002);
  EXPECT_DOUBLE_EQ(d.expected(0.8), 0.8);  // a prompt chunk the stage's batch times say takes 0.8 s
  EXPECT_DOUBLE_EQ(d.limit(0.8), 3 * 0.8 + 0.25);
  EXPECT_DOUBLE_EQ(d.expected(-1), 0.002);  // no prediction
}

TEST(StepDeadline, NegativeTimesCountAsZero) {
  StepDeadline d(opts(4, 1, 0, 1, 3));
  d.observe(-2);
  EXPECT_DOUBLE_EQ(d.median(), 0);
  EXPECT_DOUBLE_EQ(d.limit(0), 1);
}

}  // namespace
}  // namespace tessera::cluster
