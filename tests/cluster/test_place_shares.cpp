// Members of --place group stages over real `tessera worker` processes that lack the model: each receives just its
// share of its stage's layers from the stage's leader (the head, or a worker that leads) into its --cache, the text
// is one node's, and the next start with the same layout sends nothing.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "support/test_paths.h"
#include "support/worker_group.h"

namespace tessera {
namespace {

class ScalarEnvironment : public ::testing::Environment {
 public:
  void SetUp() override { setenv("TESSERA_ISA", "scalar", 1); }
};
const auto* const kEnv = ::testing::AddGlobalTestEnvironment(new ScalarEnvironment);

std::filesystem::path stories() { return test::source_dir() / "models/stories260K.gguf"; }

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

const std::vector<std::string> kCommon = {
    "run", "-m",  stories().string(), "-p", "Once upon a time there was", "-n", "8", "--temp", "0", "-t", "1",
    "-c",  "256", "--kv-type",        "f32"};

// --place 'tp(local,a),b': the head leads the first stage and sends member a (no --models) its share.
TEST(PlaceShares, HeadSendsItsMemberTheShareOnce) {
  test::TempDir dir;
  const auto one = test::tessera(kCommon);
  ASSERT_EQ(one.exit_code, 0) << one.err;
  test::WorkerGroup w(dir, 0, stories().parent_path());
  w.add_with({"--cache", (dir / "cache-a").string()});
  w.add(stories().parent_path());
  const auto run = [&] {
    auto args = kCommon;
    args.insert(args.end(), {"--workers", w.list(), "--place", "tp(local,a),b", "--key-file", w.key, "--wire-type",
                             "f32", "--no-plan"});
    return test::tessera(args);
  };
  const auto first = run();
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_EQ(first.out, one.out);
  EXPECT_EQ(test::count_of(first.err, "has no copy of the model: sending its share"), 1u) << first.err;
  EXPECT_EQ(test::count_of(first.err, "weights from the head ("), 1u) << first.err;
  EXPECT_EQ(first.err.find("group: 0 weight bytes sent to the members"), std::string::npos) << first.err;

  const auto second = run();
  ASSERT_EQ(second.exit_code, 0) << second.err;
  EXPECT_EQ(second.out, one.out);
  EXPECT_EQ(test::count_of(second.err, "has no copy of the model"), 0u) << second.err;
  EXPECT_NE(second.err.find("weights from its cache, 0 weight bytes sent"), std::string::npos) << second.err;
  EXPECT_NE(second.err.find("group: 0 weight bytes sent to the members"), std::string::npos) << second.err;
}

// --place 'local,tp(a,b)': worker a leads the second stage (it received the stage whole from the head) and sends
// member b (no --models) its share of those layers; a's log counts it.
TEST(PlaceShares, WorkerLeaderSendsItsMemberTheShareOnce) {
  test::TempDir dir;
  const auto one = test::tessera(kCommon);
  ASSERT_EQ(one.exit_code, 0) << one.err;
  test::WorkerGroup w(dir, 0, stories().parent_path());
  const auto leader_log = dir / "a.log";
  w.add_with({"--models", stories().parent_path().string()}, leader_log);
  w.add_with({"--cache", (dir / "cache-b").string()});
  const auto run = [&] {
    auto args = kCommon;
    args.insert(args.end(), {"--workers", w.list(), "--place", "local,tp(a,b)", "--key-file", w.key, "--wire-type",
                             "f32", "--no-plan"});
    return test::tessera(args);
  };
  const auto first = run();
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_EQ(first.out, one.out);
  const std::string first_log = read_text(leader_log);
  EXPECT_EQ(test::count_of(first_log, "has no copy of the model: sending its share"), 1u) << first_log;
  EXPECT_EQ(test::count_of(first_log, "weights from the head ("), 1u) << first_log;
  EXPECT_EQ(first_log.find("group: 0 weight bytes sent to the members"), std::string::npos) << first_log;

  const auto second = run();
  ASSERT_EQ(second.exit_code, 0) << second.err;
  EXPECT_EQ(second.out, one.out);
  const std::string second_log = read_text(leader_log).substr(first_log.size());
  EXPECT_EQ(test::count_of(second_log, "has no copy of the model"), 0u) << second_log;
  EXPECT_NE(second_log.find("weights from its cache, 0 weight bytes sent"), std::string::npos) << second_log;
  EXPECT_NE(second_log.find("group: 0 weight bytes sent to the members"), std::string::npos) << second_log;
}

}  // namespace
}  // namespace tessera
