// --repack in the plan: a node that packs at load needs the packed copy of its stage's matrices, exactly the bytes a
// real Stage packs on this CPU (none where the kernels have no packed layout), and a plan that lacks it does not fit.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "gguf/gguf_writer.h"
#include "model/quant_mix.h"
#include "model/stage.h"
#include "plan/plan_report.h"
#include "plan/planner.h"
#include "support/test_paths.h"
#include "support/tiny_model.h"

namespace tessera::plan {
namespace {

NodeProfile node(const std::string& name, uint64_t mem_bytes, bool repack) {
  const PlanConstants k;
  NodeProfile n;
  n.name = name;
  n.mem_available_bytes = mem_bytes;
  n.mem_read_gbps = 40;
  n.int8_gops = 16 * k.int8_gops_per_core;
  n.f32_gflops = 16 * k.f32_gflops_per_core;
  n.repack = repack;
  return n;
}

Cluster cluster(std::vector<NodeProfile> nodes) {
  const std::string head = nodes.front().name;
  return Cluster(std::move(nodes), head, {}, LinkProfile{"*", "*", 0.2e-3, 10, "test"});
}

PlanOptions options() {
  PlanOptions o;
  o.workload.prompt_tokens = 64;
  o.workload.n_gen = 16;
  o.workload.n_ctx = 256;
  o.requant_advice = false;
  return o;
}

// What a real stage of these layers packs at load on this CPU.
uint64_t stage_packed_bytes(const std::filesystem::path& path, tessera::LayerRange layers, bool first, bool last) {
  ThreadPool pool(1);
  StageOptions so;
  so.n_ctx = 64;
  so.repack = true;
  so.copy_weights = false;
  const Stage stage(ModelWeights::load(path, layers, first, last), so, pool);
  return stage.packed_bytes();
}

// A tiny synthetic model; `tied` drops output.weight, so the head multiplies by token_embd (gen-model always writes
// the head).
std::filesystem::path write_model(const test::TempDir& dir, const char* arch, const char* type, bool tied) {
  const auto path = dir / "m.gguf";
  test::write_tiny_model(path, arch, type);
  if (!tied) return path;
  const auto file = gguf::GgufFile::open(path);
  gguf::GgufWriter w;
  w.metadata() = file.metadata();
  for (const auto& t : file.tensors()) {
    if (t.name == "output.weight") continue;
    const auto data = file.tensor_data(t);
    w.add_tensor(t.name, t.type, t.ne, std::vector<uint8_t>(data.begin(), data.end()));
  }
  const auto tied_path = dir / "tied.gguf";
  w.write(tied_path);
  return tied_path;
}

// Whether this CPU's kernels pack the model's matrix type at all (AVX-512 packs the quantized types).
bool packs(GgmlType type) { return Stage::packing_kernels().packed(type) != nullptr; }

TEST(RepackMemory, PlanCountsExactlyWhatTheStagesPack) {
  // A dense model, the same with a tied head (a last stage packs token_embd), and experts.
  for (const auto& [arch, tied] : {std::pair{"llama", false}, std::pair{"qwen2", true}, std::pair{"qwen3moe", false}}) {
    for (const char* type : {"q4_k_m", "q8_0"}) {
      SCOPED_TRACE(fmt::format("{} {}{}", arch, type, tied ? " tied" : ""));
      test::TempDir dir;
      const auto path = write_model(dir, arch, type, tied);
      const auto file = gguf::GgufFile::open(path);
      const ModelConfig config = ModelConfig::from_gguf(file);
      ASSERT_EQ(config.tied_output, tied);
      const ModelCost m = model_cost_from_file(file, config, GgmlType::F16, "m");
      const uint64_t big = uint64_t{64} << 30;

      // One node: the whole model.
      const Plan plain = make_plan(m, cluster({node("a", big, false)}), options());
      const Plan packed = make_plan(m, cluster({node("a", big, true)}), options());
      const NodeMemory& p0 = plain.strategies.front().memory.front();
      const NodeMemory& r0 = packed.strategies.front().memory.front();
      const uint64_t whole = stage_packed_bytes(path, {0, config.n_layer}, true, true);
      EXPECT_EQ(whole > 0, packs(quant_mix_from_name(type).base));
      EXPECT_EQ(p0.packed, 0u);
      EXPECT_EQ(r0.packed, whole);
      EXPECT_EQ(r0.weights, p0.weights);
      EXPECT_EQ(r0.needs, p0.needs + whole);
      EXPECT_EQ(r0.needs, r0.weights + r0.kv_cache + r0.buffers + r0.packed);
      EXPECT_EQ(m.total_packed_bytes(), whole);

      // Two stages, one layer each: the first packs its layer, the last its layer and the head.
      PlanOptions split = options();
      split.split = parse_split("0@a,1@b");
      const Plan two = make_plan(m, cluster({node("a", big, true), node("b", big, true)}), split);
      const Strategy& user = two.strategies.back();
      ASSERT_EQ(user.kind, StrategyKind::UserSplit);
      ASSERT_EQ(user.memory.size(), 2u);
      EXPECT_EQ(user.memory[0].packed, stage_packed_bytes(path, {0, 1}, true, false));
      EXPECT_EQ(user.memory[1].packed, stage_packed_bytes(path, {1, 2}, false, true));
    }
  }
}

TEST(RepackMemory, ANodeWithoutRoomForThePackedCopyDoesNotFit) {
  test::TempDir dir;
  const auto path = write_model(dir, "llama", "q8_0", false);
  const auto file = gguf::GgufFile::open(path);
  const ModelConfig config = ModelConfig::from_gguf(file);
  const ModelCost m = model_cost_from_file(file, config, GgmlType::F16, "m");
  const PlanConstants k;

  // Measure both figures on a roomy node, then plan for a node whose memory lies between them.
  const uint64_t big = uint64_t{64} << 30;
  const uint64_t without = make_plan(m, cluster({node("a", big, false)}), options()).strategies[0].memory[0].needs;
  const uint64_t with = make_plan(m, cluster({node("a", big, true)}), options()).strategies[0].memory[0].needs;
  const uint64_t packed = stage_packed_bytes(path, {0, config.n_layer}, true, true);
  ASSERT_EQ(with, without + packed);
  const auto between = static_cast<uint64_t>(static_cast<double>(without + packed / 2) / (1.0 - k.memory_headroom)) + 1;

  const Cluster plain_node = cluster({node("a", between, false)});
  const Plan plain = make_plan(m, plain_node, options());
  EXPECT_TRUE(plain.strategies[0].feasible);
  EXPECT_TRUE(plain.chosen);

  const Cluster packing_node = cluster({node("a", between, true)});
  const Plan repacked = make_plan(m, packing_node, options());
  const Strategy& local = repacked.strategies[0];
  const auto j = plan_json(repacked, m, packing_node);
  const auto& mem = j["strategies"][0]["memory_per_node"][0];
  EXPECT_EQ(mem["packed_bytes"].get<uint64_t>(), packed);
  EXPECT_EQ(mem["needs_bytes"].get<uint64_t>(), with);
  EXPECT_TRUE(j["nodes"][0]["repack"].get<bool>());
  const std::string text = plan_text(repacked, m, packing_node);
  if (packs(GgmlType::Q8_0)) {
    // The packed copy is what pushes it over, and the numbers shown say so.
    ASSERT_GT(packed, 0u);
    EXPECT_FALSE(local.feasible);
    EXPECT_FALSE(repacked.chosen);
    EXPECT_GT(local.memory[0].needs, local.memory[0].has);
    EXPECT_LE(local.memory[0].needs - local.memory[0].packed, local.memory[0].has);
    EXPECT_FALSE(mem["fits"].get<bool>());
    EXPECT_NE(local.why.find("packed copy (--repack)"), std::string::npos) << local.why;
    EXPECT_NE(text.find(" x  1  local"), std::string::npos) << text;
    EXPECT_NE(text.find("packed copy for the whole model"), std::string::npos) << text;
  } else {
    // This CPU packs nothing, so --repack costs nothing and the plan is the plain one.
    EXPECT_EQ(packed, 0u);
    EXPECT_TRUE(local.feasible);
    EXPECT_EQ(local.memory[0].needs, without);
    EXPECT_NE(text.find("pack none of these weights"), std::string::npos) << text;
  }
}

}  // namespace
}  // namespace tessera::plan
