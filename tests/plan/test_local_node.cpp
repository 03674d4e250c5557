// The head's profile: a fresh cached probe is reused without measuring (free memory read anew), a saved
// `tessera probe --json` output is accepted, and bad ones are refused.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>

#include "plan/local_node.h"
#include "support/test_paths.h"
#include "util/error.h"

namespace tessera::plan {
namespace {

TEST(LocalNode, FreshCacheIsReused) {
  test::TempDir dir;
  char host[256] = {};
  ASSERT_EQ(gethostname(host, sizeof(host) - 1), 0);
  const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  const nlohmann::json cache = {
      {"time", now - 30},
      {"host", host},
      {"cores", available_cores()},
      {"threads", 0},
      {"mem_read_gbps", 12.5},
      {"int8_gops", 345.0},
      {"f32_gflops", 67.0},
      {"machine_read_gbps", 20.0},
      {"batch_rates", {{{"tokens", 8}, {"fraction", 0.7}}, {{"tokens", 256}, {"fraction", 1.0}}}}};
  std::ofstream(dir / "probe.json") << cache.dump();
  LocalProbeOptions o;
  o.cache_path = dir / "probe.json";
  const NodeProfile n = probe_local_node(o);
  EXPECT_EQ(n.name, "local");
  EXPECT_DOUBLE_EQ(n.mem_read_gbps, 12.5);
  EXPECT_DOUBLE_EQ(n.int8_gops, 345.0);
  EXPECT_DOUBLE_EQ(n.f32_gflops, 67.0);
  EXPECT_DOUBLE_EQ(n.machine_read_gbps, 20.0);
  ASSERT_EQ(n.batch_rates.size(), 2u);
  EXPECT_EQ(n.batch_rates[0].tokens, 8);
  EXPECT_DOUBLE_EQ(n.batch_rates[0].fraction, 0.7);
  EXPECT_GT(n.mem_available_bytes, 0u);
  EXPECT_EQ(n.source.rfind("probe cache, ", 0), 0u) << n.source;
}

TEST(LocalNode, SavedProbeOutput) {
  const NodeProfile n = node_from_probe_json(
      R"({"threads": 2, "mem_read_gbps": 16.8, "int8_gops": 671.3, "f32_gflops": 164.3, "cores": 2,
          "mem_total_bytes": 25276502016, "mem_available_bytes": 24701808640, "cpu": "x", "isa": "avx512"})",
      "p.json");
  EXPECT_DOUBLE_EQ(n.mem_read_gbps, 16.8);
  EXPECT_EQ(n.mem_available_bytes, 24701808640u);
  EXPECT_EQ(n.cores, 2);
  auto error_of = [](const char* text) {
    try {
      node_from_probe_json(text, "p.json");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(error_of("nope").find("p.json: not a JSON object"), std::string::npos);
  EXPECT_NE(error_of(R"({"mem_read_gbps": 1})").find("'int8_gops' is missing"), std::string::npos);
  EXPECT_NE(error_of(R"({"mem_read_gbps": -1, "int8_gops": 1, "f32_gflops": 1, "mem_available_bytes": 1})")
                .find("memory read bandwidth"),
            std::string::npos);
}

}  // namespace
}  // namespace tessera::plan
