// Pipelines whose stages are tensor-parallel groups of real `tessera worker` processes on loopback (--place): the same
// text as one node and F32 logits within 1e-4, a wrong --place named, and a killed member of a group stage ending the
// run with an error naming it.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
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

std::filesystem::path model_path(const std::string& model) {
  return model == "stories260K" ? test::source_dir() / "models/stories260K.gguf"
                                : test::shared_dir() / "fixtures/models" / (model + ".gguf");
}

using test::tessera;

struct Case {
  const char* model;
  const char* place;
  int workers;
};

class PlaceWorkers : public ::testing::TestWithParam<Case> {};

TEST_P(PlaceWorkers, SameTextAndLogitsAsOneNode) {
  const Case c = GetParam();
  test::TempDir dir;
  const auto model = model_path(c.model);
  const std::vector<std::string> common = {"run", "-m",        model.string(), "-p", "Once upon a time there was",
                                           "-n",  "12",        "--temp",       "0",  "-t",
                                           "1",   "--kv-type", "f32",          "-c", "256"};
  auto one_args = common;
  one_args.insert(one_args.end(), {"--logits-out", (dir / "one.f32").string()});
  const auto one = tessera(one_args);
  ASSERT_EQ(one.exit_code, 0) << one.err;

  test::WorkerGroup w(dir, c.workers, model.parent_path());
  auto par_args = common;
  par_args.insert(par_args.end(), {"--logits-out", (dir / "par.f32").string(), "--workers", w.list(), "--place",
                                   c.place, "--key-file", w.key, "--wire-type", "f32"});
  const auto par = tessera(par_args);
  ASSERT_EQ(par.exit_code, 0) << par.err;
  EXPECT_EQ(par.out, one.out);
  // Every group of two linked (one line per group, from whichever member leads it).
  EXPECT_NE(par.err.find("pipeline: "), std::string::npos) << par.err;
  EXPECT_LE(test::max_logit_diff(dir / "one.f32", dir / "par.f32"), 1e-4f) << c.model << " " << c.place;
}

INSTANTIATE_TEST_SUITE_P(Layouts, PlaceWorkers,
                         ::testing::Values(Case{"stories260K", "local,tp(a,b)", 2},
                                           Case{"stories260K", "tp(local,a),tp(b,c)", 3},
                                           Case{"llama-f32", "local,tp(a,b)", 2},
                                           Case{"llama-f32", "tp(local,a),tp(b,c)", 3},
                                           Case{"qwen3moe-f32", "ep(local,a),b", 2}),
                         [](const auto& p) {
                           std::string s = std::string(p.param.model) + "_" + p.param.place;
                           for (auto& ch : s) ch = std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
                           while (s.back() == '_') s.pop_back();
                           return s;
                         });

TEST(PlaceWorkersErrors, BadPlaceIsNamed) {
  test::TempDir dir;
  const auto model = model_path("stories260K");
  test::WorkerGroup w(dir, 2, model.parent_path());
  const auto with = [&](const std::string& place, bool key = true) {
    std::vector<std::string> args = {"run", "-m", model.string(), "-p",     "Once",    "-n", "2",
                                     "-t",  "1",  "--workers",    w.list(), "--place", place};
    if (key) args.insert(args.end(), {"--key-file", w.key});
    return tessera(args);
  };
  const auto expect_error = [&](const std::string& place, const std::string& text, bool key = true) {
    const auto r = with(place, key);
    EXPECT_NE(r.exit_code, 0) << place;
    EXPECT_NE(r.err.find(text), std::string::npos) << place << ": " << r.err;
  };
  expect_error("local,tp(a,x)", "'x' is not a node here: the nodes are local (this head), a, b");
  expect_error("local,tp(a,a)", "a appears twice");
  expect_error("tp(a,local),b", "local must come first in 'tp(a,local)'");
  expect_error("local,tp(a)", "'tp(a)' has one member");
  expect_error("local,xp(a,b)", "a group is tp(...), ep(...) or tpep(...)");
  expect_error("local,tp(a,b", "a '(' without its ')'");
  expect_error("local,,tp(a,b)", "an empty stage");
  expect_error("local,tp(a,b)", "only the cluster key authenticates them: give --key-file", false);
  expect_error("local,tp(a:0,b)", "'a:0' in 'tp(a:0,b)': a member's share is a positive number");
  expect_error("local,tp(a:x,b)", "a member's share is a positive number after its name");
  expect_error("local:2,tp(a,b)", "'local:2': a share is for a member of a group");
  // --tp with --place, and --pp over workers, say what to write instead.
  auto r = tessera({"run", "-m", model.string(), "-p", "Once", "-n", "2", "--workers", w.list(), "--place",
                    "local,tp(a,b)", "--tp", "2", "--key-file", w.key});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("leave out --tp/--ep"), std::string::npos) << r.err;
  r = tessera({"run", "-m", model.string(), "-p", "Once", "-n", "2", "--workers", w.list(), "--place", "local,tp(a,b)",
               "--tp-shares", "2,1", "--key-file", w.key});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("shares after its members' names (tp(local:2,a)"), std::string::npos) << r.err;
  r = tessera({"run", "-m", model.string(), "-p", "Once", "-n", "2", "--workers", w.list(), "--tp", "2", "--pp", "2",
               "--key-file", w.key});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("--place 'tp(local,a),tp(b,c)'"), std::string::npos) << r.err;
}

// A member of a group stage killed mid-step: the run ends within seconds with an error naming it.
TEST(PlaceWorkersFaults, KilledMemberIsNamed) {
  test::TempDir dir;
  test::WorkerGroup w(dir, 2, model_path("stories260K").parent_path());
  test::expect_killed_worker_named(w, "local,tp(a,b)", 1, "b");
}

// A member of a worker-led group stage killed mid-generation, with a spare and --recovery-timeout: the leader ends
// its session with the error, the head marks the stage down and re-forms the group with the spare in the dead
// member's place (the leader links it); the text is one node's.
// The killed member's stage with the spare `spare` ("" for the third worker): the head's output and the text.
std::pair<std::string, std::string> kill_member_mid_run(const std::string& spare_arg, test::WorkerGroup& w,
                                                        const test::TempDir& dir,
                                                        const std::vector<std::string>& common) {
  auto args = common;
  args.insert(args.end(), {"--workers", w.list({0, 1}), "--place", "local,tp(a,b)", "--spare", spare_arg,
                           "--recovery-timeout", "30", "--collective-timeout", "5", "--key-file", w.key, "--no-plan"});
  test::Background head(args, dir / "text.out");
  EXPECT_TRUE(head.wait_for("pipeline: ", 60s)) << head.output();
  std::this_thread::sleep_for(200ms);
  kill(w.workers[1]->pid(), SIGKILL);
  EXPECT_EQ(head.wait_exit(60s), 0) << head.output();
  std::ifstream in(dir / "text.out");
  return {head.output(), std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>())};
}

TEST(PlaceWorkersFaults, KilledMemberWithASpareIsReplaced) {
  test::TempDir dir;
  const auto model = model_path("stories260K");
  const std::vector<std::string> common = {
      "run",    "-m", model.string(), "-p", "Once upon a time", "-n", "1500", "-c", "1600",
      "--temp", "0",  "-t",           "1",  "--ignore-eos"};
  const auto one = tessera(common);
  ASSERT_EQ(one.exit_code, 0) << one.err;
  test::WorkerGroup w(dir, 3, model.parent_path());
  const auto [output, text] = kill_member_mid_run(w.workers[2]->address(), w, dir, common);
  EXPECT_NE(output.find("re-formed as its group again, led by a: " + w.workers[2]->address() + " in b's place"),
            std::string::npos)
      << output;
  EXPECT_EQ(text, one.out);
}

// No spare worker free (only --spare local): the stage is not re-formed but taken by one node, the head.
TEST(PlaceWorkersFaults, KilledMemberWithoutASpareWorkerFallsBackToOneNode) {
  test::TempDir dir;
  const auto model = model_path("stories260K");
  const std::vector<std::string> common = {
      "run",    "-m", model.string(), "-p", "Once upon a time", "-n", "1500", "-c", "1600",
      "--temp", "0",  "-t",           "1",  "--ignore-eos"};
  const auto one = tessera(common);
  ASSERT_EQ(one.exit_code, 0) << one.err;
  test::WorkerGroup w(dir, 2, model.parent_path());
  const auto [output, text] = kill_member_mid_run("local", w, dir, common);
  EXPECT_EQ(output.find("re-formed"), std::string::npos) << output;
  EXPECT_NE(output.find("now runs on local"), std::string::npos) << output;
  EXPECT_EQ(text, one.out);
}

}  // namespace
}  // namespace tessera
