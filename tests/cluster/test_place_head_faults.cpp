// A member of the group the head leads (--place 'tp(local,a),b') killed mid-generation: with a spare worker the head
// re-forms its group with the spare in the member's place (sending the spare its share), without one it takes the
// stage's layers whole, and either way the text is one node's; without recovery the run ends naming the member.
#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <fstream>
#include <thread>

#include "support/background_process.h"
#include "support/place_faults.h"
#include "support/test_paths.h"
#include "support/worker_group.h"
#include "support/worker_process.h"

namespace tessera {
namespace {

using namespace std::chrono_literals;
using test::stories;
using test::tessera;

// Greedy and long enough that the member dies mid-generation.
const std::vector<std::string> kCommon = {
    "run", "-m", stories().string(), "-p", "Once upon a time", "-n", "1500", "-c", "1600", "--temp", "0",
    "-t",  "1",  "--ignore-eos"};

// The workers of `w` but the last `spares` run `place` with `extra` flags; a is killed once the pipeline stands. The
// head's output and the text it wrote. F32 partial sums: with f16 ones the group's text leaves one node's after ~250
// tokens.
std::pair<std::string, std::string> kill_head_member(test::WorkerGroup& w, const test::TempDir& dir,
                                                     const std::vector<std::string>& extra,
                                                     const std::string& place = "tp(local,a),b", size_t spares = 0) {
  std::vector<size_t> placed;
  for (size_t i = 0; i + spares < w.workers.size(); ++i) placed.push_back(i);
  auto args = kCommon;
  args.insert(args.end(), {"--workers", w.list(placed), "--place", place, "--recovery-timeout", "30",
                           "--collective-timeout", "5", "--key-file", w.key, "--no-plan", "--wire-type", "f32"});
  args.insert(args.end(), extra.begin(), extra.end());
  test::Background head(args, dir / "text.out");
  EXPECT_TRUE(head.wait_for("pipeline: ", 60s)) << head.output();
  std::this_thread::sleep_for(200ms);
  kill(w.workers[0]->pid(), SIGKILL);
  EXPECT_EQ(head.wait_exit(60s), 0) << head.output();
  std::ifstream in(dir / "text.out");
  return {head.output(), std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>())};
}

// The spare has no copy of the model: the head sends it its share, as to a member at start.
TEST(PlaceWorkersFaults, KilledHeadGroupMemberWithASpareIsReplaced) {
  test::TempDir dir;
  const auto one = tessera(kCommon);
  ASSERT_EQ(one.exit_code, 0) << one.err;
  test::WorkerGroup w(dir, 2, stories().parent_path());
  w.add_with({"--cache", (dir / "cache-c").string()});
  const std::string spare = w.workers[2]->address();
  const auto [output, text] = kill_head_member(w, dir, {"--spare", spare}, "tp(local,a),b", 1);
  EXPECT_NE(output.find("re-formed as its group again, led by local: " + spare + " in a's place"), std::string::npos)
      << output;
  EXPECT_EQ(test::count_of(output, "has no copy of the model: sending its share"), 1u) << output;
  EXPECT_EQ(output.find("now runs on"), std::string::npos) << output;
  EXPECT_EQ(text, one.out);
}

// A group of three: the surviving member b takes part again (it ended its session when the group broke), the spare
// in a's place.
TEST(PlaceWorkersFaults, KilledMemberOfAHeadGroupOfThreeKeepsTheOther) {
  test::TempDir dir;
  const auto one = tessera(kCommon);
  ASSERT_EQ(one.exit_code, 0) << one.err;
  test::WorkerGroup w(dir, 4, stories().parent_path());
  const std::string spare = w.workers[3]->address();
  const auto [output, text] = kill_head_member(w, dir, {"--spare", spare}, "tp(local,a,b),c", 1);
  EXPECT_NE(output.find("re-formed as its group again, led by local: " + spare + " in a's place"), std::string::npos)
      << output;
  EXPECT_EQ(text, one.out);
}

// No spare at all, or only --spare local: the head, which held a share of the stage, takes its layers whole.
TEST(PlaceWorkersFaults, KilledHeadGroupMemberWithoutASpareFallsBackToTheHead) {
  const auto one = tessera(kCommon);
  ASSERT_EQ(one.exit_code, 0) << one.err;
  for (const std::vector<std::string>& extra :
       {std::vector<std::string>{}, std::vector<std::string>{"--spare", "local"}}) {
    SCOPED_TRACE(extra.empty() ? "no --spare" : "--spare local");
    test::TempDir dir;
    test::WorkerGroup w(dir, 2, stories().parent_path());
    const auto [output, text] = kill_head_member(w, dir, extra);
    EXPECT_EQ(output.find("re-formed"), std::string::npos) << output;
    EXPECT_NE(output.find("stage 0 (layers 0-"), std::string::npos) << output;
    EXPECT_NE(output.find("now runs on local alone"), std::string::npos) << output;
    EXPECT_EQ(text, one.out);
  }
}

// --recovery-timeout 0: the run ends within seconds with an error naming the member.
TEST(PlaceWorkersFaults, KilledHeadGroupMemberIsNamed) {
  test::TempDir dir;
  test::WorkerGroup w(dir, 2, stories().parent_path());
  test::expect_killed_worker_named(w, "tp(local,a),b", 0, "a");
}

}  // namespace
}  // namespace tessera
