// The flow-shop recurrence against makespans worked out by hand.
#include <gtest/gtest.h>

#include <vector>

#include "util/flow_shop.h"

namespace tessera {
namespace {

TEST(FlowShop, JobsQueueBehindTheBusiestElement) {
  // Three jobs over elements taking 1 and 3: the second element sets the pace after the first job reaches it.
  const std::vector<double> t = {1, 3};
  const auto busy = [&](int64_t, size_t j) { return t[j]; };
  EXPECT_DOUBLE_EQ(flow_shop_makespan(3, 2, busy, busy), 1 + 3 * 3);
  // Jobs of different lengths on two equal elements: element 0 ends them at 2, 6, 7; element 1 at 4, 10, 11.
  const std::vector<double> len = {2, 4, 1};
  const auto by_job = [&](int64_t c, size_t) { return len[static_cast<size_t>(c)]; };
  EXPECT_DOUBLE_EQ(flow_shop_makespan(3, 2, by_job, by_job), 11);
}

TEST(FlowShop, LatencyDelaysTheNextElementWithoutHoldingThisOne) {
  // A link that is busy 1 per job but delivers 5 after it starts: the jobs pipeline through its delay.
  const std::vector<double> busy = {2, 1, 2};
  const std::vector<double> pass = {2, 5, 2};
  const auto b = [&](int64_t, size_t j) { return busy[j]; };
  const auto p = [&](int64_t, size_t j) { return pass[j]; };
  // Job 0 leaves at 2 + 5 + 2 = 9; job 1 starts at 2, reaches the last element at 4 + 5 = 9, waits for it until 9,
  // leaves at 11; job 2 starts at 4, arrives at 11, leaves at 13.
  EXPECT_DOUBLE_EQ(flow_shop_makespan(3, 3, b, p), 13);
}

TEST(FlowShop, NothingToRunTakesNoTime) {
  const auto one = [](int64_t, size_t) { return 1.0; };
  EXPECT_DOUBLE_EQ(flow_shop_makespan(0, 3, one, one), 0);
  EXPECT_DOUBLE_EQ(flow_shop_makespan(4, 0, one, one), 0);
}

}  // namespace
}  // namespace tessera
