// `tessera bench` and `tessera probe` as scripts use them: llama-bench's JSON and CSV fields, the markdown table,
// one row per test and thread count, results on standard output only, clear errors. No timing is asserted.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <nlohmann/json.hpp>
#include <sstream>

#include "support/test_paths.h"
#include "support/worker_process.h"

namespace tessera {
namespace {

using nlohmann::json;

using test::tessera;

std::string stories() { return (test::source_dir() / "models/stories260K.gguf").string(); }

// A small buffer and a short time keep the bandwidth probe quick; its figure is not checked against anything.
const std::vector<std::string> kQuickProbe = {"--probe-seconds", "0.05", "--probe-buffer-mib", "8"};

test::CommandResult bench(std::vector<std::string> args) {
  args.insert(args.begin(), "bench");
  args.insert(args.end(), kQuickProbe.begin(), kQuickProbe.end());
  return tessera(args);
}

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

TEST(CliBench, JsonHasLlamaBenchFieldsForEveryTestAndThreadCount) {
  auto r = bench({"-m", stories(), "-p", "8,16", "-n", "4", "-t", "1,2", "-r", "2", "-o", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);  // standard output holds nothing but the results
  ASSERT_TRUE(j.is_array());
  ASSERT_EQ(j.size(), 6u);
  const std::vector<std::pair<int, int>> tests = {{8, 0}, {16, 0}, {0, 4}};
  for (size_t i = 0; i < j.size(); ++i) {
    const json& row = j[i];
    for (const char* key : {"model_filename",
                            "model_type",
                            "model_size",
                            "model_n_params",
                            "n_batch",
                            "n_threads",
                            "type_k",
                            "n_prompt",
                            "n_gen",
                            "test_time",
                            "avg_ns",
                            "stddev_ns",
                            "avg_ts",
                            "stddev_ts",
                            "samples_ns",
                            "samples_ts",
                            "roofline_ts",
                            "roofline_fraction",
                            "mem_read_gbps",
                            "mem_read_best_gbps",
                            "roofline_fraction_best",
                            "samples_best_gbps",
                            "isa"}) {
      EXPECT_TRUE(row.contains(key)) << key;
    }
    EXPECT_EQ(row["model_filename"], stories());
    EXPECT_EQ(row["model_type"], "llama 293K F32");
    EXPECT_EQ(row["model_size"], 1171200);
    EXPECT_EQ(row["n_batch"], 512);
    EXPECT_EQ(row["type_k"], "f16");
    EXPECT_EQ(row["n_threads"], i < 3 ? 1 : 2);
    EXPECT_EQ(row["n_prompt"], tests[i % 3].first);
    EXPECT_EQ(row["n_gen"], tests[i % 3].second);
    EXPECT_TRUE(row["avg_ns"].is_number_unsigned());
    const auto ns = row["samples_ns"].get<std::vector<uint64_t>>();
    const auto ts = row["samples_ts"].get<std::vector<double>>();
    ASSERT_EQ(ns.size(), 2u);
    ASSERT_EQ(ts.size(), 2u);
    const double tokens = row["n_prompt"].get<double>() + row["n_gen"].get<double>();
    for (size_t k = 0; k < 2; ++k) EXPECT_NEAR(ts[k], 1e9 * tokens / static_cast<double>(ns[k]), 1e-9 * ts[k]);
    EXPECT_NEAR(row["avg_ts"].get<double>(), (ts[0] + ts[1]) / 2, 1e-9 * ts[0]);
    EXPECT_NEAR(row["avg_ns"].get<double>(), (static_cast<double>(ns[0]) + static_cast<double>(ns[1])) / 2, 1.0);
    EXPECT_GT(row["mem_read_gbps"].get<double>(), 0);
    const auto gbps = row["samples_gbps"].get<std::vector<double>>();
    if (row["n_gen"] == 0) {
      EXPECT_TRUE(row["roofline_ts"].is_null());
      EXPECT_TRUE(gbps.empty());
    } else {
      // Each repeat against the bandwidth measured just before it.
      ASSERT_EQ(gbps.size(), 2u);
      EXPECT_NEAR(row["mem_read_gbps"].get<double>(), (gbps[0] + gbps[1]) / 2, 1e-9 * gbps[0]);
      const double roofline_per_gbps = row["roofline_ts"].get<double>() / row["mem_read_gbps"].get<double>();
      EXPECT_NEAR(row["roofline_fraction"].get<double>(),
                  (ts[0] / (gbps[0] * roofline_per_gbps) + ts[1] / (gbps[1] * roofline_per_gbps)) / 2, 1e-9);
      // The same against each measurement's best pass.
      const auto best = row["samples_best_gbps"].get<std::vector<double>>();
      ASSERT_EQ(best.size(), 2u);
      EXPECT_NEAR(row["mem_read_best_gbps"].get<double>(), (best[0] + best[1]) / 2, 1e-9 * best[0]);
      EXPECT_NEAR(row["roofline_fraction_best"].get<double>(),
                  (ts[0] / (best[0] * roofline_per_gbps) + ts[1] / (best[1] * roofline_per_gbps)) / 2, 1e-9);
    }
  }
  EXPECT_NE(r.err.find("memory read"), std::string::npos) << r.err;
}

TEST(CliBench, CsvHasAHeaderAndOneQuotedRowPerTest) {
  auto r = bench({"-m", stories(), "-p", "8", "-n", "2,3", "-t", "1", "-r", "2", "-o", "csv", "--no-probe"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto rows = lines(r.out);
  ASSERT_EQ(rows.size(), 4u) << r.out;
  EXPECT_EQ(rows[0].find("model_filename,model_type,model_size,model_n_params,n_batch,n_threads,type_k"),
            rows[0].find("model_filename"));
  EXPECT_NE(rows[0].find("n_prompt,n_gen,n_depth,test_time,avg_ns,stddev_ns,avg_ts,stddev_ts"), std::string::npos);
  const std::string model_cells = fmt::format("\"{}\",\"llama 293K F32\"", stories());
  EXPECT_NE(rows[1].find(model_cells), std::string::npos) << rows[1];
  EXPECT_NE(rows[1].find(",\"8\",\"0\","), std::string::npos) << rows[1];
  EXPECT_NE(rows[2].find(",\"0\",\"2\","), std::string::npos) << rows[2];
  EXPECT_NE(rows[3].find(",\"0\",\"3\","), std::string::npos) << rows[3];
}

TEST(CliBench, MarkdownTableLikeLlamaBench) {
  auto r = bench({"-p", "8", "-n", "4", "-t", "1", "-r", "2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto rows = lines(r.out);
  ASSERT_EQ(rows.size(), 4u) << r.out;
  for (const char* col : {"| model", "size", "params", "threads", "test", "t/s", "roofline t/s", "% roofline"}) {
    EXPECT_NE(rows[0].find(col), std::string::npos) << col;
  }
  EXPECT_EQ(rows[1].rfind("| ---", 0), 0u);
  EXPECT_NE(rows[2].find("pp8"), std::string::npos);
  EXPECT_NE(rows[2].find("±"), std::string::npos);
  EXPECT_NE(rows[3].find("tg4"), std::string::npos);
  EXPECT_NE(rows[3].find("%"), std::string::npos);

  auto plain = bench({"-p", "8", "-n", "0", "-t", "1", "-r", "1", "--no-probe"});
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_EQ(plain.out.find("roofline"), std::string::npos);
  EXPECT_EQ(lines(plain.out).size(), 3u);
}

TEST(CliBench, GeneratedMoeModel) {
  test::TempDir dir;
  const std::string model = (dir / "moe.gguf").string();
  auto gen = tessera({"gen-model", "--arch", "qwen3moe", "--preset", "tiny", "--type", "q4_0", "-o", model});
  ASSERT_EQ(gen.exit_code, 0) << gen.err;
  auto r = bench({"-m", model, "-p", "8", "-n", "2", "-t", "1", "-r", "2", "-o", "json", "--kv-type", "f32"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  ASSERT_EQ(j.size(), 2u);
  EXPECT_EQ(j[0]["model_type"].get<std::string>().rfind("qwen3moe ", 0), 0u) << j[0]["model_type"];
  EXPECT_NE(j[0]["model_type"].get<std::string>().find("Q4_0"), std::string::npos) << j[0]["model_type"];
  EXPECT_EQ(j[0]["type_k"], "f32");
  // The roofline counts the experts a token uses, not all of them: more tokens/s than the whole file allows.
  const double whole_file_ts = j[1]["mem_read_gbps"].get<double>() * 1e9 / j[1]["model_size"].get<double>();
  EXPECT_GT(j[1]["roofline_ts"].get<double>(), whole_file_ts);
}

TEST(CliBench, BadInputIsAClearError) {
  auto bad_list = tessera({"bench", "-p", "12,,x"});
  EXPECT_EQ(bad_list.exit_code, 1);
  EXPECT_NE(bad_list.err.find("-p: bad list '12,,x': empty item"), std::string::npos) << bad_list.err;
  EXPECT_TRUE(bad_list.out.empty());

  auto bad_threads = tessera({"bench", "-t", "0"});
  EXPECT_EQ(bad_threads.exit_code, 1);
  EXPECT_NE(bad_threads.err.find("-t: bad list '0': 0 is below the minimum of 1"), std::string::npos)
      << bad_threads.err;

  auto missing = tessera({"bench", "-m", "/nonexistent/model.gguf", "--no-probe"});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("/nonexistent/model.gguf: cannot open"), std::string::npos) << missing.err;
  EXPECT_TRUE(missing.out.empty());

  auto vocab_only = tessera({"bench", "-m", (test::shared_dir() / "models/vocab/ggml-vocab-gpt-2.gguf").string()});
  EXPECT_EQ(vocab_only.exit_code, 1);
  EXPECT_NE(vocab_only.err.find("unsupported architecture 'gpt2'"), std::string::npos) << vocab_only.err;

  auto nothing = tessera({"bench", "-p", "0", "-n", "0"});
  EXPECT_EQ(nothing.exit_code, 1);
  EXPECT_NE(nothing.err.find("nothing to run"), std::string::npos) << nothing.err;

  auto bad_format = tessera({"bench", "-o", "xml"});
  EXPECT_NE(bad_format.exit_code, 0);
}

// A row's per-repeat rates agree with its token count (every sequence's tokens) and its times.
void check_rate(const json& row) {
  const auto ns = row["samples_ns"].get<std::vector<uint64_t>>();
  const auto ts = row["samples_ts"].get<std::vector<double>>();
  ASSERT_EQ(ns.size(), ts.size());
  ASSERT_FALSE(ns.empty());
  // Concurrent rows count every sequence's tokens: n_prompt + n_gen x concurrency per repeat.
  const double tokens = row["n_prompt"].get<double>() + row["n_gen"].get<double>() * row["concurrency"].get<double>();
  for (size_t k = 0; k < ns.size(); ++k) {
    EXPECT_NEAR(ts[k], 1e9 * tokens / static_cast<double>(ns[k]), 1e-9 * ts[k]);
    EXPECT_TRUE(std::isfinite(ts[k]) && ts[k] > 0);
  }
}

// llama-bench's -d: each test at each depth, named "tg3 @ d8", with n_depth in JSON.
TEST(CliBench, DepthRunsEveryTestAfterThatManyTokens) {
  auto r = bench({"-m", stories(), "-p", "4", "-n", "3", "-d", "0,8", "-t", "1", "-r", "1", "-o", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  ASSERT_EQ(j.size(), 4u) << r.out;
  const std::vector<std::array<int, 3>> want = {{4, 0, 0}, {4, 0, 8}, {0, 3, 0}, {0, 3, 8}};
  for (size_t i = 0; i < j.size(); ++i) {
    EXPECT_EQ(j[i]["n_prompt"], want[i][0]) << i;
    EXPECT_EQ(j[i]["n_gen"], want[i][1]) << i;
    EXPECT_EQ(j[i]["n_depth"], want[i][2]) << i;
    check_rate(j[i]);
  }
  EXPECT_FALSE(j[3]["roofline_ts"].is_null());

  auto md = bench({"-m", stories(), "-p", "0", "-n", "3", "-d", "16", "-t", "1", "-r", "1", "--no-probe"});
  ASSERT_EQ(md.exit_code, 0) << md.err;
  EXPECT_NE(md.out.find(" tg3 @ d16 |"), std::string::npos) << md.out;

  auto bad = tessera({"bench", "-m", stories(), "-d", "8,x"});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("-d: bad list '8,x'"), std::string::npos) << bad.err;
}

TEST(CliBench, ConcurrentDecodeLocally) {
  auto r = bench({"-m", stories(), "-p", "0", "-n", "6", "--concurrency", "1,3", "-t", "1", "-r", "2", "-o", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  ASSERT_EQ(j.size(), 2u) << r.out;
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(j[i]["n_gen"], 6);
    EXPECT_EQ(j[i]["n_workers"], 0);
    EXPECT_EQ(j[i]["split"], "");
    EXPECT_TRUE(j[i]["wire_bytes_per_token"].is_null());
    check_rate(j[i]);
  }
  EXPECT_EQ(j[0]["concurrency"], 1);
  EXPECT_EQ(j[1]["concurrency"], 3);
  EXPECT_FALSE(j[0]["roofline_ts"].is_null());
  EXPECT_TRUE(j[1]["roofline_ts"].is_null());  // one stream's ceiling does not apply to three

  auto md = bench({"-m", stories(), "-p", "0", "-n", "4", "--concurrency", "2", "-t", "1", "-r", "1", "--no-probe"});
  ASSERT_EQ(md.exit_code, 0) << md.err;
  EXPECT_NE(md.out.find("tg4x2"), std::string::npos) << md.out;

  auto bad = tessera({"bench", "-m", stories(), "--np", "0"});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("--concurrency: bad list '0': 0 is below the minimum of 1"), std::string::npos) << bad.err;
  auto split_alone = tessera({"bench", "-m", stories(), "--split", "a:1"});
  EXPECT_EQ(split_alone.exit_code, 1);
  EXPECT_NE(split_alone.err.find("--split needs --workers"), std::string::npos) << split_alone.err;
}

TEST(CliBench, OverTwoWorkersWithWireBytesAndThePlan) {
  // One worker and the head with their threads pinned (--pin): the same results.
  test::WorkerProcess a, b({"--pin"});
  const std::string workers = fmt::format("a={},b={}", a.address(), b.address());
  auto r = bench({"-m", stories(), "--workers", workers, "-p", "16", "-n", "5", "--np", "1,4", "-t", "1", "-r", "2",
                  "-o", "json", "--pin"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  ASSERT_EQ(j.size(), 3u) << r.out;
  const std::vector<std::pair<int, int>> tests = {{16, 0}, {0, 5}, {0, 5}};
  for (size_t i = 0; i < j.size(); ++i) {
    const json& row = j[i];
    EXPECT_EQ(row["n_prompt"], tests[i].first);
    EXPECT_EQ(row["n_gen"], tests[i].second);
    EXPECT_EQ(row["concurrency"], i == 2 ? 4 : 1);
    EXPECT_EQ(row["n_workers"], 2);
    // The even default split over the two workers, in --split syntax, the head computing nothing.
    const std::string split = row["split"].get<std::string>();
    EXPECT_EQ(split.rfind("0-", 0), 0u) << split;
    EXPECT_NE(split.find("@a,"), std::string::npos) << split;
    EXPECT_EQ(split.substr(split.size() - 2), "@b") << split;
    ASSERT_TRUE(row["wire_bytes_per_token"].is_number()) << row;
    EXPECT_GT(row["wire_bytes_per_token"].get<double>(), 0);
    check_rate(row);
  }
  // Decode sends token ids and activations, never the logits (sampling happens on the last worker): well under
  // one f32 logits row (512 x 4 bytes for this model) per token beyond the activations (64 values each way per hop).
  EXPECT_LT(j[1]["wire_bytes_per_token"].get<double>(), 2048 + 8 * 64 * 4);
  // The plan printed at start names both workers, with the measured links and the split that runs.
  EXPECT_NE(r.err.find("your split"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("worker a:"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("worker b:"), std::string::npos) << r.err;
  EXPECT_TRUE(a.running());
  EXPECT_TRUE(b.running());
}

TEST(CliBench, CheckPlanRunsLocalAndPipelineAndComparesWithThePlanner) {
  test::WorkerProcess a, b;
  const std::string workers = fmt::format("a={},b={}", a.address(), b.address());
  auto r = bench({"-m", stories(), "--workers", workers, "--split", "0-1@a,2-4@b", "-p", "16", "-n", "4", "-t", "1",
                  "-r", "1", "--check-plan", "-o", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);  // the comparison goes to standard error with JSON output
  ASSERT_EQ(j.size(), 4u) << r.out;
  EXPECT_EQ(j[0]["n_workers"], 0);
  EXPECT_EQ(j[1]["n_workers"], 0);
  EXPECT_EQ(j[2]["n_workers"], 2);
  EXPECT_EQ(j[2]["split"], "0-1@a,2-4@b");
  const size_t at = r.err.find("Planner check (predicted against measured):");
  ASSERT_NE(at, std::string::npos) << r.err;
  const auto rows = lines(r.err.substr(at));
  ASSERT_GE(rows.size(), 6u) << r.err;
  EXPECT_NE(rows[1].find("measured/predicted"), std::string::npos) << rows[1];
  int local = 0, pipeline = 0;
  for (size_t i = 2; i < 6; ++i) {
    local += rows[i].rfind("local", 0) == 0;
    pipeline += rows[i].rfind("pipeline 0-1@a,2-4@b", 0) == 0;
    EXPECT_EQ(rows[i].find(" - "), std::string::npos) << rows[i];  // every strategy fits: all have predictions
  }
  EXPECT_EQ(local, 2);
  EXPECT_EQ(pipeline, 2);
  // Then, per test, the planner's own choice against what measured fastest.
  const size_t v = r.err.find("The planner's choice for each test against the fastest measured:");
  ASSERT_NE(v, std::string::npos) << r.err;
  const auto verdicts = lines(r.err.substr(v));
  ASSERT_GE(verdicts.size(), 4u) << r.err;
  EXPECT_NE(verdicts[1].find("planner's choice"), std::string::npos) << verdicts[1];
  for (size_t i = 2; i < 4; ++i) {
    EXPECT_TRUE(verdicts[i].rfind("pp16", 0) == 0 || verdicts[i].rfind("tg4", 0) == 0) << verdicts[i];
    EXPECT_NE(verdicts[i].find("agrees"), std::string::npos) << verdicts[i];  // "agrees" or "disagrees"
  }
}

TEST(CliProbe, JsonHasEveryKey) {
  auto r = tessera({"probe", "--json", "--seconds", "0.2", "--buffer-mib", "16", "-t", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  for (const char* key : {"threads", "mem_read_gbps", "mem_read_best_gbps", "mem_read_gbps_1t", "int8_gops",
                          "f32_gflops", "cores", "mem_total_bytes", "mem_available_bytes", "cpu", "isa"}) {
    ASSERT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j["threads"], 1);
  for (const char* key : {"mem_read_gbps", "mem_read_gbps_1t", "int8_gops", "f32_gflops"}) {
    EXPECT_TRUE(std::isfinite(j[key].get<double>())) << key;
    EXPECT_GT(j[key].get<double>(), 0) << key;
  }
  EXPECT_GE(j["mem_read_best_gbps"].get<double>(), j["mem_read_gbps"].get<double>());
  EXPECT_GE(j["cores"].get<int>(), 1);
  EXPECT_GT(j["mem_total_bytes"].get<uint64_t>(), 0u);
  EXPECT_FALSE(j["cpu"].get<std::string>().empty());
  EXPECT_TRUE(j["isa"] == "scalar" || j["isa"] == "avx2" || j["isa"] == "avx512") << j["isa"];
}

TEST(CliProbe, TextForPeople) {
  auto r = tessera({"probe", "--seconds", "0.1", "--buffer-mib", "8"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* label : {"cpu:", "cores:", "kernel isa:", "memory:", "memory read:", "int8 dot:", "f32 fma:"}) {
    EXPECT_NE(r.out.find(label), std::string::npos) << label;
  }
  auto bad = tessera({"probe", "--seconds", "0"});
  EXPECT_NE(bad.exit_code, 0);
}

}  // namespace
}  // namespace tessera
