// `tessera plan` as a user runs it: the worked example's clusters and models, JSON for scripts, exit codes and the
// messages for what cannot be placed.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "support/test_paths.h"
#include "support/worker_process.h"

namespace tessera {
namespace {

using nlohmann::json;

test::CommandResult plan(std::vector<std::string> args) {
  args.insert(args.begin(), {test::tessera_bin().string(), "plan"});
  return test::run_command(args);
}

std::string vms() { return (test::source_dir() / "examples/clusters/three-vms-10g.json").string(); }

// Without groups (--no-parallel) local wins for a 7B model; with them, two VMs in tensor parallel read half the
// weights each and win despite their 56 all-reduces per token.
TEST(CliPlan, LocalWinsForA7BModelOnThreeVms) {
  const auto tp = plan({"--cluster", vms(), "--model-shape", "qwen2.5-7b", "--json"});
  ASSERT_EQ(tp.exit_code, 0) << tp.err;
  const json t = json::parse(tp.out);
  EXPECT_EQ(t["strategies"][t["chosen"].get<size_t>()]["name"], "tensor parallel x2");
  const auto r = plan({"--cluster", vms(), "--model-shape", "qwen2.5-7b", "--json", "--no-parallel"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  const auto& chosen = j["strategies"][j["chosen"].get<size_t>()];
  EXPECT_EQ(chosen["name"], "local");
  EXPECT_EQ(chosen["nodes"], json::array({"vm1"}));
  EXPECT_TRUE(chosen["feasible"].get<bool>());
  EXPECT_GT(chosen["pred_decode_tps"].get<double>(), 1.0);
  EXPECT_GT(chosen["pred_prefill_tps"].get<double>(), chosen["pred_decode_tps"].get<double>());
  EXPECT_EQ(chosen["memory_per_node"][0]["node"], "vm1");
  EXPECT_NE(chosen["bottleneck"].get<std::string>().find("memory bandwidth"), std::string::npos);
  EXPECT_FALSE(chosen["why"].get<std::string>().empty());
  EXPECT_EQ(j["decision"].get<std::string>().rfind("Local wins", 0), 0u);
  EXPECT_EQ(j["model"]["n_layer"], 28);
  EXPECT_EQ(j["workload"]["prompt_tokens"], 512);
}

TEST(CliPlan, SeventyTwoBAtQ8SplitsAndSuggestsQ4First) {
  const auto r = plan({"--cluster", vms(), "--model-shape", "qwen2.5-72b", "--type", "q8_0", "-p", "256"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("strategy"), std::string::npos);
  EXPECT_NE(r.out.find("memory GiB (needs/has)"), std::string::npos);
  EXPECT_NE(r.out.find("local as Q4_K_M"), std::string::npos);
  EXPECT_NE(r.out.find("x  1  local"), std::string::npos) << r.out;  // marked as not fitting
  EXPECT_NE(r.out.find("Needs 73.9 GiB on vm1, has 53.1 GiB"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("decision:  Qwen2.5-72B Q8_0 (estimate) does not fit local"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("consider Q4_K_M"), std::string::npos) << r.out;
}

TEST(CliPlan, NothingFitsExitsOneWithTheNumbers) {
  const auto r = plan({"--cluster", vms(), "--model-shape", "llama-3.1-405b", "--type", "f16", "--json"});
  EXPECT_EQ(r.exit_code, 1);
  const json j = json::parse(r.out);
  EXPECT_TRUE(j["chosen"].is_null());
  for (const auto& s : j["strategies"]) EXPECT_FALSE(s["feasible"].get<bool>()) << s["name"];
  EXPECT_NE(r.err.find("error: no plan to run: Nothing fits"), std::string::npos) << r.err;
}

TEST(CliPlan, UserSplitAgainstThePlan) {
  const auto r = plan({"--cluster", vms(), "--model-shape", "qwen2.5-7b", "--split", "vm1:1,vm3:2", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  const auto& chosen = j["strategies"][j["chosen"].get<size_t>()];
  EXPECT_EQ(chosen["kind"], "user_split");
  EXPECT_EQ(chosen["split"], "0-8@vm1,9-27@vm3");
  EXPECT_NE(j["chosen"], j["best"]);
  EXPECT_NE(j["decision"].get<std::string>().find("Your split predicts"), std::string::npos);
}

TEST(CliPlan, BadSplitsAreRefused) {
  auto r = plan({"--cluster", vms(), "--model-shape", "qwen2.5-7b", "--split", "0-13@vm1,14-27@gpu"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("unknown node 'gpu' (valid: vm1, vm2, vm3)"), std::string::npos) << r.err;
  r = plan({"--cluster", vms(), "--model-shape", "qwen2.5-7b", "--split", "0-12@vm1,14-27@vm2"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("layer 13 are not placed on any node (the model has 28 layers"), std::string::npos) << r.err;
  r = plan({"--cluster", vms(), "--model-shape", "qwen2.5-7b", "--split", "0-14@vm1,14-27@vm2"});
  EXPECT_NE(r.err.find("layer 14 are placed on both 'vm1' and 'vm2'"), std::string::npos) << r.err;
}

TEST(CliPlan, BundledModelWithASavedProbe) {
  test::TempDir dir;
  {
    std::ofstream out(dir / "probe.json");
    out << R"({"mem_read_gbps": 20, "int8_gops": 600, "f32_gflops": 160, "mem_available_bytes": 8000000000})";
  }
  const auto r = plan({"--local-profile", (dir / "probe.json").string(), "-p", "64", "-n", "16", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["model"]["label"], "stories260K.gguf");
  EXPECT_EQ(j["nodes"][0]["name"], "local");
  EXPECT_EQ(j["nodes"][0]["mem_available_bytes"], 8000000000u);
  EXPECT_EQ(j["strategies"][j["chosen"].get<size_t>()]["name"], "local");
}

// --repack plans the packed copy of the weights on every node: a node with room for the weights but not for the
// copy as well does not fit. On a CPU whose kernels pack nothing (no AVX-512) the copy is 0 and so is the change.
TEST(CliPlan, RepackCountsThePackedCopy) {
  const std::vector<std::string> model = {"--model-shape", "llama-3.2-1b", "-p", "64", "-n", "16", "--json"};
  auto with = [&](const std::string& cluster, bool repack) {
    std::vector<std::string> args = {"--cluster", cluster};
    args.insert(args.end(), model.begin(), model.end());
    if (repack) args.push_back("--repack");
    return plan(args);
  };
  const auto plain = with(vms(), false), packed = with(vms(), true);
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  ASSERT_EQ(packed.exit_code, 0) << packed.err;
  const json jp = json::parse(plain.out), jr = json::parse(packed.out);
  const json& mp = jp["strategies"][0]["memory_per_node"][0];
  const json& mr = jr["strategies"][0]["memory_per_node"][0];
  const auto needs = mp["needs_bytes"].get<uint64_t>();
  const auto copy = mr["packed_bytes"].get<uint64_t>();
  EXPECT_EQ(mp["packed_bytes"].get<uint64_t>(), 0u);
  EXPECT_FALSE(jp["nodes"][0]["repack"].get<bool>());
  EXPECT_TRUE(jr["nodes"][0]["repack"].get<bool>());
  EXPECT_EQ(mr["needs_bytes"].get<uint64_t>(), needs + copy);
  EXPECT_EQ(mr["weights_bytes"], mp["weights_bytes"]);
  EXPECT_EQ(jr["model"]["packed_bytes"].get<uint64_t>(), copy);

  // One node with memory between the two figures (after the 5% headroom).
  test::TempDir dir;
  {
    std::ofstream out(dir / "box.json");
    out << fmt::format(R"({{"nodes": [{{"name": "box", "memory_gb": {}, "bandwidth_gbps": 40, "cores": 16}}]}})",
                       static_cast<double>(needs + copy / 2) / 0.95 / 1e9 + 1e-6);
  }
  const auto small_plain = with((dir / "box.json").string(), false);
  EXPECT_EQ(small_plain.exit_code, 0) << small_plain.err;
  const auto small_packed = with((dir / "box.json").string(), true);
  if (copy == 0) {
    EXPECT_EQ(small_packed.exit_code, 0) << small_packed.err;
    return;
  }
  // About 1.3 bytes per weight for a 1.2B model.
  EXPECT_GT(copy, uint64_t{1} << 30);
  EXPECT_EQ(small_packed.exit_code, 1) << small_packed.out;
  const json js = json::parse(small_packed.out);
  EXPECT_TRUE(js["chosen"].is_null());
  EXPECT_FALSE(js["strategies"][0]["memory_per_node"][0]["fits"].get<bool>());
  EXPECT_NE(js["strategies"][0]["why"].get<std::string>().find("packed copy (--repack)"), std::string::npos)
      << js["strategies"][0]["why"];
}

TEST(CliPlan, LiveWorkersReportTheirProfiles) {
  test::WorkerProcess a, b;
  auto r = plan({"--workers", fmt::format("a={},b={}", a.address(), b.address()), "--probe-seconds", "0.05", "--split",
                 "0-1@a,2-4@b", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  ASSERT_EQ(j["nodes"].size(), 3u);
  EXPECT_EQ(j["nodes"][0]["name"], "local");
  for (size_t i : {1u, 2u}) {
    EXPECT_EQ(j["nodes"][i]["name"], i == 1 ? "a" : "b");
    EXPECT_EQ(j["nodes"][i]["source"].get<std::string>().rfind("worker probe", 0), 0u) << j["nodes"][i];
    EXPECT_GT(j["nodes"][i]["mem_read_gbps"].get<double>(), 0);
  }
  bool user = false;
  for (const auto& s : j["strategies"]) user = user || s["name"] == "your split";
  EXPECT_TRUE(user) << r.out;
  EXPECT_TRUE(a.running());
  EXPECT_TRUE(b.running());
}

TEST(CliPlan, UsageErrors) {
  auto r = plan({"--workers", "a=127.0.0.1:1", "--probe-seconds", "0.05"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("worker a (127.0.0.1:1): cannot get its profile"), std::string::npos) << r.err;
  r = plan({"--workers", "a=127.0.0.1:1", "--cluster", vms()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("either --workers (live) or --cluster"), std::string::npos) << r.err;
  r = plan({"--cluster", "/nonexistent/c.json", "--model-shape", "qwen2.5-7b"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("/nonexistent/c.json: cannot open"), std::string::npos) << r.err;
  r = plan({"-m", "x.gguf", "--model-shape", "qwen2.5-7b"});
  EXPECT_NE(r.err.find("not both"), std::string::npos) << r.err;
  r = plan({"--cluster", vms(), "--model-shape", "gpt-5"});
  EXPECT_NE(r.err.find("unknown model shape 'gpt-5' (valid: "), std::string::npos) << r.err;
  r = plan({"--cluster", vms(), "--model-shape", "qwen2.5-7b", "-c", "100"});
  EXPECT_NE(r.err.find("raise -c"), std::string::npos) << r.err;
}

// docs/planner.md quotes the worked example's output; this keeps the quotes true when the model or its constants
// change.
TEST(CliPlan, WorkedExampleInTheDocsIsCurrent) {
  std::ifstream in(test::source_dir() / "docs/planner.md");
  const std::string doc((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_FALSE(doc.empty());
  const std::vector<std::pair<std::vector<std::string>, bool>> runs = {
      {{"--model-shape", "qwen2.5-7b"}, true},
      {{"--model-shape", "qwen2.5-7b", "--concurrency", "8"}, false},
      {{"--model-shape", "qwen3-30b-a3b"}, true},
      {{"--model-shape", "qwen3-30b-a3b", "--concurrency", "8"}, false},
      {{"--model-shape", "qwen2.5-72b", "--type", "q8_0"}, true},
      {{"--model-shape", "qwen2.5-72b"}, true},
  };
  for (const auto& [args, whole] : runs) {
    std::vector<std::string> argv = {"--cluster", "examples/clusters/three-vms-10g.json"};
    argv.insert(argv.end(), args.begin(), args.end());
    for (auto& a : argv) {
      if (a.starts_with("examples/")) a = (test::source_dir() / a).string();
    }
    const auto r = plan(argv);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    std::string expected = whole ? r.out : r.out.substr(r.out.find("    #  strategy"));
    while (!expected.empty() && expected.back() == '\n') expected.pop_back();
    EXPECT_NE(doc.find(expected), std::string::npos)
        << "docs/planner.md does not show the output of plan " << args[1] << (whole ? "" : " (table onwards)") << ":\n"
        << expected;
  }
}

// The worked example's 72B and 30B-A3B plans show their tensor/expert-parallel rows with the arithmetic behind
// each prediction, 3 ranks included (8 KV heads over 3 ranks: 3/2/3).
TEST(CliPlan, ThreeVmsShowTensorAndExpertParallelWithTheirArithmetic) {
  auto r = plan({"--cluster", vms(), "--model-shape", "qwen2.5-72b"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* want :
       {"tensor parallel x2  vm1+vm2", "tensor parallel x3  vm1+vm2+vm3", "KV heads 3/2/3 of 8",
        "one decoded token (each rank its share, then the collectives)",
        "slowest rank vm1: 14.8 GiB / 38.0 GB/s = 419 ms",
        "+ 160 all-reduces of 32 KiB x (560 us + 32 KiB / 0.94 GB/s) = 95.2 ms",
        "ring of 3: 2(3-1) x (100 us RTT/2 + 40 us per message) = 560 us", "= 516 ms per token: 1.94 tok/s decode",
        "decision:  Tensor parallel x3 over vm1, vm2, vm3 predicts 1.94 tok/s decode"}) {
    EXPECT_NE(r.out.find(want), std::string::npos) << want << "\n" << r.out;
  }
  r = plan({"--cluster", vms(), "--model-shape", "qwen2.5-72b", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  const auto& chosen = j["strategies"][j["chosen"].get<size_t>()];
  EXPECT_EQ(chosen["kind"], "tensor_parallel");
  EXPECT_EQ(chosen["nodes"], json::array({"vm1", "vm2", "vm3"}));
  EXPECT_EQ(chosen["parallel"][0]["all_reduces_per_token"], 160);
  EXPECT_EQ(chosen["parallel"][0]["flags"], "--tp 3");
  EXPECT_EQ(chosen["parallel"][0]["ranks"].size(), 3u);
  EXPECT_FALSE(chosen["arithmetic"].empty());

  r = plan({"--cluster", vms(), "--model-shape", "qwen3-30b-a3b"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* want :
       {"expert parallel x3", "tensor+expert parallel x3", "experts 43/42/43 of 128", "+ 48 all-reduces of 8.0 KiB",
        "+ 96 all-reduces of 8.0 KiB", "(--ep 3;", "(--tp 3 --ep 3;"}) {
    EXPECT_NE(r.out.find(want), std::string::npos) << want << "\n" << r.out;
  }
  // --no-parallel leaves them out.
  r = plan({"--cluster", vms(), "--model-shape", "qwen3-30b-a3b", "--no-parallel"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.find("parallel x"), std::string::npos) << r.out;
}

// The same three VMs on slow and on fast links: tensor parallelism is chosen only where the all-reduces are cheap.
TEST(CliPlan, TensorParallelOnlyWhenTheLinksAreFast) {
  test::TempDir dir;
  const auto write = [&](const std::string& name, double gbit, double rtt_ms) {
    std::ofstream out(dir / name);
    out << fmt::format(
        R"({{"head": "vm1", "nodes": [{{"name": "vm1", "memory_gb": 60, "bandwidth_gbps": 40, "cores": 16}},
             {{"name": "vm2", "memory_gb": 60, "bandwidth_gbps": 40, "cores": 16}},
             {{"name": "vm3", "memory_gb": 60, "bandwidth_gbps": 40, "cores": 16}}],
            "network": {{"gbit_per_s": {}, "rtt_ms": {}}}}})",
        gbit, rtt_ms);
    return (dir / name).string();
  };
  const auto chosen_kind = [&](const std::string& file) {
    const auto r = plan({"--cluster", file, "--model-shape", "qwen2.5-72b", "--json"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    const json j = json::parse(r.out);
    return j["strategies"][j["chosen"].get<size_t>()]["kind"].get<std::string>();
  };
  EXPECT_EQ(chosen_kind(write("fast.json", 100, 0.05)), "tensor_parallel");
  EXPECT_EQ(chosen_kind(write("slow.json", 1, 10)), "local");
}

TEST(CliPlan, ListShapes) {
  const auto r = plan({"--list-shapes"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* name : {"llama-3-8b", "llama-3-70b", "qwen2.5-7b", "qwen2.5-72b", "qwen3-30b-a3b", "mixtral-8x7b",
                           "gemma-3-27b", "gemma-4-26b-a4b", "gemma-4-31b"}) {
    EXPECT_NE(r.out.find(name), std::string::npos) << name;
  }
}

}  // namespace
}  // namespace tessera
