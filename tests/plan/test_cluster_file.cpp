// cluster.json: the bundled examples parse; each kind of mistake is refused with the file, node and key named.
#include <gtest/gtest.h>

#include "plan/cluster_file.h"
#include "support/test_paths.h"
#include "util/error.h"

namespace tessera::plan {
namespace {

std::string error_of(const std::string& text) {
  try {
    parse_cluster_json(text, "c.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(ClusterFile, ExamplesParse) {
  const Cluster c = load_cluster_file(test::source_dir() / "examples/clusters/three-vms-10g.json");
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c.head().name, "vm1");
  EXPECT_EQ(c.nodes()[1].mem_available_bytes, 60000000000u);
  EXPECT_DOUBLE_EQ(c.nodes()[2].mem_read_gbps, 40.0);
  EXPECT_EQ(c.nodes()[0].cores, 16);
  const PlanConstants k;
  EXPECT_DOUBLE_EQ(c.nodes()[0].int8_gops, 16 * k.int8_gops_per_core);
  const LinkProfile l = c.link("vm2", "vm3");
  EXPECT_DOUBLE_EQ(l.gbit_per_s, 10.0);
  EXPECT_DOUBLE_EQ(l.rtt_s, 0.0002);

  const Cluster h = load_cluster_file(test::source_dir() / "examples/clusters/home-lab.json");
  EXPECT_EQ(h.head().name, "laptop");
  EXPECT_EQ(h.nodes()[0].mem_available_bytes, uint64_t{12} << 30);
  EXPECT_DOUBLE_EQ(h.link("oldpc", "desktop").gbit_per_s, 2.5);  // listed pair, either direction
  EXPECT_DOUBLE_EQ(h.link("laptop", "oldpc").gbit_per_s, 1.0);   // the default network
  EXPECT_DOUBLE_EQ(h.link("laptop", "laptop").rtt_s, 0.0);
}

TEST(ClusterFile, HeadDefaultsToTheFirstNode) {
  const Cluster c = parse_cluster_json(
      R"({"nodes": [{"name": "x", "memory_gib": 8, "bandwidth_gbps": 10, "int8_gops": 100, "f32_gflops": 50}]})",
      "c.json");
  EXPECT_EQ(c.head().name, "x");
  EXPECT_EQ(c.nodes()[0].mem_available_bytes, uint64_t{8} << 30);
}

TEST(ClusterFile, Errors) {
  const std::string node = R"({"name": "a", "memory_gb": 8, "bandwidth_gbps": 10, "cores": 4})";
  EXPECT_NE(error_of("{").find("c.json: not valid JSON"), std::string::npos);
  EXPECT_NE(error_of(R"({"nodes": 1e999})").find("c.json: not valid JSON"), std::string::npos);
  EXPECT_NE(error_of("[]").find("top level must be an object"), std::string::npos);
  EXPECT_NE(error_of("{}").find("\"nodes\" must be a non-empty array"), std::string::npos);
  EXPECT_NE(error_of(R"({"nodes": [], "x": 1})").find("unknown key 'x'"), std::string::npos);
  const std::string typo = error_of(R"({"nodes": [{"name": "a", "memory_gb": 8, "bandwith_gbps": 10, "cores": 4}]})");
  EXPECT_NE(typo.find("node 'a': unknown key 'bandwith_gbps'"), std::string::npos) << typo;
  EXPECT_NE(typo.find("bandwidth_gbps"), std::string::npos) << typo;
  EXPECT_NE(error_of(R"({"nodes": [{"name": "a", "bandwidth_gbps": 10, "cores": 4}]})").find("exactly one of"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"nodes": [{"name": "a", "memory_gb": 8, "memory_gib": 8, "bandwidth_gbps": 10, "cores": 4}]})")
                .find("exactly one of"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"nodes": [{"name": "a", "memory_gb": 8, "bandwidth_gbps": 10}]})").find("give 'cores'"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"nodes": [{"name": "a", "memory_gb": 8, "bandwidth_gbps": -1, "cores": 4}]})")
                .find("memory read bandwidth"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"nodes": [{"name": "a", "memory_gb": "8", "bandwidth_gbps": 1, "cores": 4}]})")
                .find("'memory_gb' must be a number, not string"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"nodes": [{"name": "a b", "memory_gb": 8, "bandwidth_gbps": 1, "cores": 4}]})")
                .find("bad node name 'a b'"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"nodes": [)" + node + "," + node + "]}").find("'a' appears twice"), std::string::npos);
  EXPECT_NE(error_of(R"({"head": "zz", "nodes": [)" + node + "]}").find("head 'zz' is not one of the nodes (valid: a)"),
            std::string::npos);
  const std::string b = R"({"name": "b", "memory_gb": 8, "bandwidth_gbps": 10, "cores": 4})";
  EXPECT_NE(error_of(R"({"nodes": [)" + node + "," + b + "]}").find("no link between 'a' and 'b'"), std::string::npos);
  EXPECT_NE(error_of(R"({"nodes": [)" + node + "," + b +
                     R"(], "links": [{"between": ["a", "c"], "gbit_per_s": 1, "rtt_ms": 1}]})")
                .find("unknown node 'c' (valid: a, b)"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"nodes": [)" + node + "," + b + R"(], "network": {"gbit_per_s": 0, "rtt_ms": 1}})")
                .find("bandwidth 0 Gbit/s"),
            std::string::npos);
  EXPECT_NE(
      error_of(R"({"nodes": [)" + node + "," + b + R"(], "network": {"gbit_per_s": 1}})").find("'rtt_ms' is missing"),
      std::string::npos);
}

}  // namespace
}  // namespace tessera::plan
