// Members of --place group stages over real `tessera worker` processes that lack the model: each receives just its
// share of its stage's layers from the stage's leader (the head, or a worker that leads) into its --cache, the text
// is one node's, and the next start with the same layout sends nothing. Uneven shares (tp(local:3,a)) and
// --ep-redundancy change what a member holds: the bytes it receives, with one node's text.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>

#include "support/test_paths.h"
#include "support/worker_group.h"

namespace tessera {
namespace {

using test::stories;

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

// The bytes the leader's log says it sent its members ("group: N weight bytes sent to the members"); -1: no such line.
int64_t bytes_sent(const std::string& log) {
  std::smatch m;
  static const std::regex line("group: ([0-9]+) weight bytes sent to the members");
  return std::regex_search(log, m, line) ? std::stoll(m[1].str()) : -1;
}

// One run of kCommon over `place` with `extra` flags and the workers `w`: the leader's log (the head's, or
// `leader_log`'s new part when a worker leads) and the result.
struct PlacedRun {
  test::CommandResult result;
  std::string leader_log;
};
PlacedRun run_place(const test::WorkerGroup& w, const std::string& place, std::vector<std::string> extra,
                    const std::filesystem::path& logits, const std::filesystem::path& leader_log = {}) {
  const size_t before = leader_log.empty() ? 0 : read_text(leader_log).size();
  auto args = kCommon;
  args.insert(args.end(), {"--workers", w.list(), "--place", place, "--key-file", w.key, "--wire-type", "f32",
                           "--no-plan", "--logits-out", logits.string()});
  args.insert(args.end(), extra.begin(), extra.end());
  PlacedRun r{test::tessera(args), {}};
  r.leader_log = leader_log.empty() ? r.result.err : read_text(leader_log).substr(before);
  return r;
}

// tp(local:3,a): a holds a quarter of the first stage's split rows, so it receives less than under tp(local,a); the
// text and logits are one node's either way.
TEST(PlaceShares, UnevenSharesInAHeadLedGroup) {
  test::TempDir dir;
  auto one_args = kCommon;
  one_args.insert(one_args.end(), {"--logits-out", (dir / "one.f32").string()});
  const auto one = test::tessera(one_args);
  ASSERT_EQ(one.exit_code, 0) << one.err;
  test::WorkerGroup w(dir, 0, stories().parent_path());
  w.add_with({});  // no --models, no --cache: its share is sent at every start
  w.add(stories().parent_path());
  const auto even = run_place(w, "tp(local,a),b", {}, dir / "even.f32");
  ASSERT_EQ(even.result.exit_code, 0) << even.result.err;
  const auto uneven = run_place(w, "tp(local:3,a),b", {}, dir / "uneven.f32");
  ASSERT_EQ(uneven.result.exit_code, 0) << uneven.result.err;
  EXPECT_EQ(even.result.out, one.out);
  EXPECT_EQ(uneven.result.out, one.out);
  EXPECT_NE(uneven.result.err.find("--place: tp(local:3,a:1) holds layers 0-"), std::string::npos) << uneven.result.err;
  EXPECT_NE(uneven.result.err.find("shares 3,1"), std::string::npos) << uneven.result.err;
  EXPECT_LE(test::max_logit_diff(dir / "one.f32", dir / "uneven.f32"), 1e-4f);
  const int64_t even_bytes = bytes_sent(even.leader_log);
  const int64_t uneven_bytes = bytes_sent(uneven.leader_log);
  EXPECT_GT(even_bytes, 0) << even.leader_log;
  EXPECT_GT(uneven_bytes, 0) << uneven.leader_log;
  EXPECT_LT(uneven_bytes, even_bytes);
}

// local,tp(a:3,b): the shares travel in LoadStage to the worker that leads (protocol 12), which sends b its smaller
// share.
TEST(PlaceShares, UnevenSharesInAWorkerLedGroup) {
  test::TempDir dir;
  auto one_args = kCommon;
  one_args.insert(one_args.end(), {"--logits-out", (dir / "one.f32").string()});
  const auto one = test::tessera(one_args);
  ASSERT_EQ(one.exit_code, 0) << one.err;
  test::WorkerGroup w(dir, 0, stories().parent_path());
  const auto leader_log = dir / "a.log";
  w.add_with({"--models", stories().parent_path().string()}, leader_log);
  w.add_with({});
  const auto even = run_place(w, "local,tp(a,b)", {}, dir / "even.f32", leader_log);
  ASSERT_EQ(even.result.exit_code, 0) << even.result.err;
  const auto uneven = run_place(w, "local,tp(a:3,b)", {}, dir / "uneven.f32", leader_log);
  ASSERT_EQ(uneven.result.exit_code, 0) << uneven.result.err;
  EXPECT_EQ(uneven.result.out, one.out);
  EXPECT_LE(test::max_logit_diff(dir / "one.f32", dir / "uneven.f32"), 1e-4f);
  const int64_t even_bytes = bytes_sent(even.leader_log);
  const int64_t uneven_bytes = bytes_sent(uneven.leader_log);
  EXPECT_GT(uneven_bytes, 0) << uneven.leader_log;
  EXPECT_LT(uneven_bytes, even_bytes) << even.leader_log << uneven.leader_log;
}

// --ep-redundancy applies to ep() groups: with copies of experts (the default 0.5) member a receives more than with
// none, and the text is one node's both ways.
TEST(PlaceShares, EpRedundancyAppliesToEpGroups) {
  test::TempDir dir;
  const auto model = test::shared_dir() / "fixtures/models/qwen3moe-f32.gguf";
  std::vector<std::string> common = {"run", "-m", model.string(), "-p",        "Once upon a time there was",
                                     "-n",  "8",  "--temp",       "0",         "-t",
                                     "1",   "-c", "256",          "--kv-type", "f32"};
  const auto one = test::tessera(common);
  ASSERT_EQ(one.exit_code, 0) << one.err;
  test::WorkerGroup w(dir, 0, model.parent_path());
  w.add_with({});
  w.add(model.parent_path());
  const auto run = [&](const char* redundancy) {
    auto args = common;
    args.insert(args.end(), {"--workers", w.list(), "--place", "ep(local,a),b", "--key-file", w.key, "--wire-type",
                             "f32", "--no-plan", "--ep-redundancy", redundancy});
    return test::tessera(args);
  };
  const auto none = run("0");
  ASSERT_EQ(none.exit_code, 0) << none.err;
  const auto half = run("0.5");
  ASSERT_EQ(half.exit_code, 0) << half.err;
  EXPECT_EQ(none.out, one.out);
  EXPECT_EQ(half.out, one.out);
  EXPECT_NE(none.err.find("--ep-redundancy 0"), std::string::npos) << none.err;
  EXPECT_NE(half.err.find("--ep-redundancy 0.5"), std::string::npos) << half.err;
  EXPECT_GT(bytes_sent(none.err), 0) << none.err;
  EXPECT_LT(bytes_sent(none.err), bytes_sent(half.err));
}

}  // namespace
}  // namespace tessera
