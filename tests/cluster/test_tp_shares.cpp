// Members of a --tp/--ep group over real `tessera worker` processes that lack the model: the head sends each just its
// share (ShareTable + chunks) into its --cache; the logits match one node's, the next start with the same layout
// sends 0 weight bytes, a group mixes a member with the file and one without, and too small a --mem-limit is refused
// with an error naming the worker before any byte is sent.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>

#include "support/test_paths.h"
#include "support/worker_group.h"
#include "support/worker_process.h"

namespace tessera {
namespace {

using test::stories;

using test::count_of;
using test::tessera;

struct Case {
  const char* model;  // a fixture name, or "stories260K"
  int ranks;
  const char* mode;
  bool mixed;  // the first worker has the file in --models; the others receive their share
};

std::filesystem::path model_path(const Case& c) {
  return std::string(c.model) == "stories260K"
             ? stories()
             : test::shared_dir() / "fixtures/models" / (std::string(c.model) + ".gguf");
}

class TpShares : public ::testing::TestWithParam<Case> {};

TEST_P(TpShares, ShareSentOnceLogitsAsOneNode) {
  const Case c = GetParam();
  test::TempDir dir;
  const auto model = model_path(c);
  const std::string key = (dir / "k.key").string();
  ASSERT_EQ(tessera({"keygen", "-o", key}).exit_code, 0);
  const std::vector<std::string> common = {
      "run",         "-m", model.string(), "-p",        "Once upon a time there was",
      "-n",          "8",  "--temp",       "0",         "-t",
      "1",           "-c", "256",          "--kv-type", "f32",
      "--exact-gelu"};
  auto one_args = common;
  one_args.insert(one_args.end(), {"--logits-out", (dir / "one.f32").string()});
  const auto one = tessera(one_args);
  ASSERT_EQ(one.exit_code, 0) << one.err;

  std::vector<std::unique_ptr<test::WorkerProcess>> workers;
  std::string list;
  const int receivers = c.mixed ? c.ranks - 2 : c.ranks - 1;
  for (int i = 0; i < c.ranks - 1; ++i) {
    std::vector<std::string> args = {"--key-file", key};
    if (c.mixed && i == 0) {
      args.insert(args.end(), {"--models", model.parent_path().string()});
    } else {
      args.insert(args.end(), {"--cache", (dir / ("cache" + std::to_string(i))).string()});
    }
    workers.push_back(std::make_unique<test::WorkerProcess>(args));
    list += std::string(list.empty() ? "" : ",") + static_cast<char>('a' + i) + "=" + workers.back()->address();
  }
  const auto parallel = [&](const char* out) {
    auto args = common;
    args.insert(args.end(), {"--logits-out", (dir / out).string(), c.mode, std::to_string(c.ranks), "--workers", list,
                             "--key-file", key, "--wire-type", "f32"});
    return tessera(args);
  };
  const auto first = parallel("first.f32");
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_EQ(first.out, one.out);
  EXPECT_EQ(count_of(first.err, "has no copy of the model: sending its share"), static_cast<size_t>(receivers))
      << first.err;
  EXPECT_EQ(count_of(first.err, "weights from the head ("), static_cast<size_t>(receivers)) << first.err;
  if (c.mixed) {
    EXPECT_NE(first.err.find("weights from its --models copy, 0 weight bytes sent"), std::string::npos);
  }
  EXPECT_EQ(first.err.find("group: 0 weight bytes sent to the members"), std::string::npos) << first.err;
  const auto a = test::read_floats(dir / "one.f32");
  const auto b = test::read_floats(dir / "first.f32");
  ASSERT_EQ(a.size(), b.size());
  ASSERT_GT(a.size(), 0u);
  float max_diff = 0;
  for (size_t i = 0; i < a.size(); ++i) max_diff = std::max(max_diff, std::fabs(a[i] - b[i]));
  EXPECT_LE(max_diff, 1e-4f) << c.model;

  // The same layout again: every receiver finds its share in its cache, and the head sends nothing.
  const auto second = parallel("second.f32");
  ASSERT_EQ(second.exit_code, 0) << second.err;
  EXPECT_EQ(second.out, one.out);
  EXPECT_NE(second.err.find("group: 0 weight bytes sent to the members"), std::string::npos) << second.err;
  EXPECT_EQ(count_of(second.err, "weights from its cache, 0 weight bytes sent"), static_cast<size_t>(receivers))
      << second.err;
  EXPECT_EQ(test::read_floats(dir / "second.f32"), b);
}

INSTANTIATE_TEST_SUITE_P(Models, TpShares,
                         ::testing::Values(Case{"stories260K", 2, "--tp", false}, Case{"stories260K", 3, "--tp", true},
                                           Case{"stories260K", 3, "--tp", false},
                                           Case{"qwen3moe-f32", 2, "--ep", false},
                                           Case{"mixtral-f32", 3, "--ep", true}),
                         [](const auto& p) {
                           std::string s = std::string(p.param.model) + "_" + (p.param.mode + 2) +
                                           std::to_string(p.param.ranks) + (p.param.mixed ? "_mixed" : "");
                           for (auto& ch : s) ch = ch == '-' ? '_' : ch;
                           return s;
                         });

// A member whose --mem-limit cannot hold its share refuses it before any byte is sent; the head names it.
TEST(TpSharesMemory, TooSmallMemLimitIsRefusedAndNamed) {
  test::TempDir dir;
  const std::string key = (dir / "k.key").string();
  ASSERT_EQ(tessera({"keygen", "-o", key}).exit_code, 0);
  test::WorkerProcess small({"--key-file", key, "--name", "tiny", "--mem-limit", "10000"});
  const auto r = tessera({"run", "-m", stories().string(), "-p", "Once", "-n", "4", "-t", "1", "--tp", "2", "--workers",
                          "b=" + small.address(), "--key-file", key});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("worker b (" + small.address() + ") cannot join the group"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("worker tiny: not enough memory"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--mem-limit"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("group: 0 weight bytes sent"), std::string::npos) << r.err;
  // The worker is still there for the next head.
  EXPECT_TRUE(small.running());
}

// The check counts what the member holds besides its share: a --mem-limit that holds the share's weights but not its
// KV cache and buffers for the group's context is refused, with each figure named.
TEST(TpSharesMemory, KvCacheAndBuffersAreCounted) {
  test::TempDir dir;
  const std::string key = (dir / "k.key").string();
  ASSERT_EQ(tessera({"keygen", "-o", key}).exit_code, 0);
  test::WorkerProcess small({"--key-file", key, "--name", "tight", "--mem-limit", "2000000"});
  const auto run = [&](const char* ctx) {
    return tessera({"run", "-m", stories().string(), "-p", "Once", "-n", "4", "-t", "1", "-c", ctx, "--tp", "2",
                    "--workers", "b=" + small.address(), "--key-file", key, "--no-plan"});
  };
  const auto r = run("512");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("worker b (" + small.address() + ") cannot join the group"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("worker tight: not enough memory: it may use"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("its KV cache"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("1 sequence(s) of 512 positions"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("of the model's"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("and buffers"), std::string::npos) << r.err;
  EXPECT_TRUE(small.running());
}

}  // namespace
}  // namespace tessera
