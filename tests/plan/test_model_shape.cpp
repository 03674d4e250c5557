// Model costs: a file's costs agree with model_profile; a shape's estimate equals the file gen-model writes for the
// same shape and mix; presets have the published parameter counts and file sizes.
#include <gtest/gtest.h>

#include "model/kv_cache.h"
#include "model/model_profile.h"
#include "model/quant_mix.h"
#include "model/synthetic_model.h"
#include "plan/model_shape.h"
#include "support/test_paths.h"
#include "util/error.h"

namespace tessera::plan {
namespace {

TEST(ModelShape, FileCostsAgreeWithModelProfile) {
  for (const char* name : {"llama-q8_0", "qwen2-f32", "qwen3-q8_0", "qwen3moe-q4_k_m", "mixtral-q4_k_m"}) {
    const auto file = gguf::GgufFile::open(test::shared_dir() / "fixtures/models" / (std::string(name) + ".gguf"));
    const ModelConfig config = ModelConfig::from_gguf(file);
    const ModelProfile profile = profile_model(file, config);
    const ModelCost cost = model_cost_from_file(file, config, GgmlType::F16, name);
    EXPECT_EQ(cost.total_bytes(), profile.weight_bytes) << name;
    EXPECT_EQ(cost.n_params, profile.n_params) << name;
    ASSERT_EQ(cost.n_layer(), config.n_layer) << name;
    for (size_t l = 0; l < cost.layers.size(); ++l) EXPECT_EQ(cost.layers[l].weight_bytes, profile.layer_bytes[l]);
    // Integer division per tensor (profile) against per layer (here): equal to a few bytes per layer.
    EXPECT_NEAR(static_cast<double>(cost.decode_bytes_per_token()), static_cast<double>(profile.decode_bytes_per_token),
                16.0 * static_cast<double>(config.n_layer))
        << name;
    EXPECT_NEAR(cost.flops_per_token(), static_cast<double>(profile.flops_per_token),
                1e-6 * static_cast<double>(profile.flops_per_token) + 64.0)
        << name;
    EXPECT_EQ(cost.layers[0].kv_bytes_per_token * cost.layers.size(), kv_bytes_per_token(config, GgmlType::F16));
    EXPECT_EQ(cost.config.is_moe(), cost.layers[0].expert_bytes > 0) << name;
  }
}

TEST(ModelShape, ShapeEstimateEqualsTheWrittenFile) {
  for (const char* arch : {"llama", "qwen2", "qwen3", "qwen3moe", "mixtral"}) {
    for (const char* type : {"q4_k_m", "q8_0", "f16"}) {
      test::TempDir dir;
      SyntheticSpec spec;
      spec.config = preset_config("tiny", arch);
      spec.type = type;
      const auto path = dir / "m.gguf";
      write_synthetic_model(spec, path);
      const auto file = gguf::GgufFile::open(path);
      const ModelConfig config = ModelConfig::from_gguf(file);
      const ModelCost real = model_cost_from_file(file, config, GgmlType::F16, "file");
      const ModelCost est = model_cost_from_shape(config, quant_mix_from_name(type), GgmlType::F16, "shape");
      EXPECT_EQ(est.total_bytes(), real.total_bytes()) << arch << " " << type;
      EXPECT_EQ(est.n_params, real.n_params) << arch << " " << type;
      EXPECT_EQ(est.decode_bytes_per_token(), real.decode_bytes_per_token()) << arch << " " << type;
      EXPECT_DOUBLE_EQ(est.flops_per_token(), real.flops_per_token()) << arch << " " << type;
      for (size_t l = 0; l < est.layers.size(); ++l) {
        EXPECT_EQ(est.layers[l].weight_bytes, real.layers[l].weight_bytes);
        EXPECT_EQ(est.layers[l].expert_bytes, real.layers[l].expert_bytes);
      }
      EXPECT_EQ(est.matmul_type, real.matmul_type) << arch << " " << type;
    }
  }
}

TEST(ModelShape, PresetsHavePublishedParameterCounts) {
  const std::vector<std::pair<const char*, double>> published = {
      {"llama-3-8b", 8.03e9},   {"llama-3-70b", 70.6e9},     {"qwen2.5-7b", 7.62e9},
      {"qwen2.5-72b", 72.7e9},  {"qwen3-8b", 8.19e9},        {"qwen3-30b-a3b", 30.5e9},
      {"mixtral-8x7b", 46.7e9}, {"llama-3.1-405b", 405.9e9}, {"qwen3-235b-a22b", 235.1e9}};
  for (const auto& [name, params] : published) {
    const ShapePreset p = shape_preset(name);
    const ModelCost c = model_cost_from_shape(p.config, quant_mix_from_name("f16"), GgmlType::F16, name);
    EXPECT_NEAR(static_cast<double>(c.n_params), params, 0.01 * params) << name;
  }
  // Active parameters of the MoE presets as published (the whole embedding counted): about 3.3B of Qwen3-30B-A3B and
  // 12.9B of Mixtral-8x7B, 2 bytes each at f16. A decode step reads one embedding row, not the table.
  for (const auto& [name, active] :
       std::vector<std::pair<const char*, double>>{{"Qwen3-30B-A3B", 3.3e9}, {"mixtral-8x7b", 12.9e9}}) {
    const auto c = model_cost_from_shape(shape_preset(name).config, quant_mix_from_name("f16"), GgmlType::F16, "");
    const double read = static_cast<double>(c.decode_bytes_per_token() - c.embd_row_bytes + c.embd_bytes);
    EXPECT_NEAR(read / 2.0, active, 0.03 * active) << name;
  }
}

TEST(ModelShape, EstimatesMatchPublishedFileSizes) {
  // Sizes of the widely distributed GGUF conversions of Meta-Llama-3-8B-Instruct (bytes of the whole file, whose
  // metadata is a few MB).
  const ShapePreset p = shape_preset("llama-3-8b");
  for (const auto& [type, bytes] :
       std::vector<std::pair<const char*, double>>{{"q4_k_m", 4.92e9}, {"q8_0", 8.54e9}, {"f16", 16.07e9}}) {
    const auto c = model_cost_from_shape(p.config, quant_mix_from_name(type), GgmlType::F16, "");
    EXPECT_NEAR(static_cast<double>(c.total_bytes()), bytes, 0.02 * bytes) << type;
  }
}

// The gemma fixtures: a file's costs agree with model_profile (per-layer embeddings by row, k of n fused experts), an
// estimate from the file's hyperparameters (expected_tensors) equals the file, and the KV cache of every pipeline
// stage is what kv_cache_config allocates for it (rings, no cache for shared layers, copies carried across).
TEST(ModelShape, GemmaFileCostsAgreeWithModelProfileAndKvCache) {
  for (const char* name : {"gemma3-f32", "gemma4-f32", "gemma4moe-f32", "gemma4moe-q4_k_m"}) {
    const auto file = gguf::GgufFile::open(test::shared_dir() / "fixtures/models" / (std::string(name) + ".gguf"));
    const ModelConfig config = ModelConfig::from_gguf(file);
    const ModelProfile profile = profile_model(file, config);
    const ModelCost cost = model_cost_from_file(file, config, GgmlType::F16, name);
    EXPECT_EQ(cost.total_bytes(), profile.weight_bytes) << name;
    EXPECT_NEAR(static_cast<double>(cost.decode_bytes_per_token()), static_cast<double>(profile.decode_bytes_per_token),
                16.0 * static_cast<double>(config.n_layer))
        << name;
    EXPECT_NEAR(cost.flops_per_token(), static_cast<double>(profile.flops_per_token),
                1e-6 * static_cast<double>(profile.flops_per_token) + 64.0)
        << name;
    for (int64_t ctx : {16, 256, 600, 4096}) {
      EXPECT_EQ(cost.kv_cache_bytes(ctx), kv_cache_bytes(config, ctx, GgmlType::F16)) << name << " " << ctx;
      for (int64_t first = 0; first < config.n_layer; ++first) {
        for (int64_t last = first; last < config.n_layer; ++last) {
          EXPECT_EQ(cost.stage_kv_cache_bytes(first, last, ctx),
                    kv_cache_config(config, first, last + 1, 1, ctx, GgmlType::F16).bytes())
              << name << " layers " << first << "-" << last << " ctx " << ctx;
        }
      }
    }
    if (std::string(name).ends_with("f32")) {
      const ModelCost est = model_cost_from_shape(config, quant_mix_from_name("f32"), GgmlType::F16, "shape");
      EXPECT_EQ(est.total_bytes(), cost.total_bytes()) << name;
      EXPECT_EQ(est.n_params, cost.n_params) << name;
      EXPECT_EQ(est.decode_bytes_per_token(), cost.decode_bytes_per_token()) << name;
      EXPECT_DOUBLE_EQ(est.flops_per_token(), cost.flops_per_token()) << name;
    }
  }
}

// gemma4-f32's layer 3 slides over 8 positions and reuses layer 1's K/V; layer 4 is global and reuses layer 2's.
TEST(ModelShape, GemmaLayerCostsBoundSlidingLayers) {
  const auto file = gguf::GgufFile::open(test::shared_dir() / "fixtures/models/gemma4-f32.gguf");
  const ModelConfig config = ModelConfig::from_gguf(file);
  const ModelCost cost = model_cost_from_file(file, config, GgmlType::F16, "gemma4");
  const LayerCost& sliding = cost.layers[3];
  EXPECT_EQ(sliding.window, 8);
  EXPECT_FALSE(sliding.kv_own);
  EXPECT_EQ(sliding.kv_cache_bytes(4096), 0u);
  EXPECT_EQ(sliding.attended_positions(4096), 8.0);
  EXPECT_EQ(sliding.kv_bytes_per_token, 128u * 2);  // what it reads per position: layer 1's 2 heads of 32, K and V
  EXPECT_EQ(cost.layers[1].kv_cache_bytes(4096), 519u * 128 * 2);
  EXPECT_EQ(cost.layers[1].kv_cache_bytes(100), 100u * 128 * 2);
  EXPECT_EQ(cost.layers[4].attended_positions(4096), 4096.0);
  // 4 query heads of 32 (sliding) or 64 (global): QK and AV.
  EXPECT_DOUBLE_EQ(sliding.attn_flops_per_pos, 2.0 * 4 * (32 + 32));
  EXPECT_DOUBLE_EQ(cost.layers[4].attn_flops_per_pos, 2.0 * 4 * (64 + 64));
  // The per-layer inputs stay with the first stage: the table by row, the projection whole.
  EXPECT_EQ(cost.input_bytes, 160u * 512 * 4 + 256u * 160 * 4 + 32u * 4);
  EXPECT_EQ(cost.input_read_bytes, 640u + 256u * 160 * 4 + 32u * 4);
  EXPECT_DOUBLE_EQ(cost.input_flops_f, 2.0 * 256 * 160);
}

// The Gemma presets carry the published configurations (docs/planner.md cites the config.json files).
TEST(ModelShape, GemmaPresetsHavePublishedShapes) {
  struct Want {
    const char* name;
    int64_t n_layer, n_embd, n_head, n_expert, n_expert_used, n_swa, n_global;
  };
  for (const Want& w :
       {Want{"gemma-3-27b", 62, 5376, 32, 0, 0, 1024, 10}, Want{"gemma-4-26b-a4b", 30, 2816, 16, 128, 8, 1024, 5},
        Want{"gemma-4-31b", 60, 5376, 32, 0, 0, 1024, 10}}) {
    const ShapePreset p = shape_preset(w.name);
    const ModelConfig& c = p.config;
    EXPECT_EQ(c.n_layer, w.n_layer) << w.name;
    EXPECT_EQ(c.n_embd, w.n_embd) << w.name;
    EXPECT_EQ(c.n_head, w.n_head) << w.name;
    EXPECT_EQ(c.n_expert, w.n_expert) << w.name;
    EXPECT_EQ(c.n_expert_used, w.n_expert_used) << w.name;
    EXPECT_EQ(c.n_swa, w.n_swa) << w.name;
    EXPECT_TRUE(c.tied_output) << w.name;
    int64_t global = 0;
    for (int64_t il = 0; il < c.n_layer; ++il) global += c.layer(il).is_swa() ? 0 : 1;
    EXPECT_EQ(global, w.n_global) << w.name;
    EXPECT_NO_THROW(c.validate(w.name));
  }
  const ModelConfig g4 = shape_preset("gemma-4-31b").config;
  EXPECT_EQ(g4.layer(0).n_head_kv, 16);
  EXPECT_EQ(g4.layer(0).head_dim, 256);
  EXPECT_EQ(g4.layer(5).n_head_kv, 4);
  EXPECT_EQ(g4.layer(5).head_dim, 512);
  EXPECT_FALSE(g4.layer(5).has_v);
  const ModelConfig moe = shape_preset("gemma-4-26b-a4b").config;
  EXPECT_EQ(moe.n_ff_exp, 704);
  EXPECT_EQ(moe.n_ff, 2112);  // the dense MLP beside the experts
  EXPECT_EQ(moe.layer(5).n_head_kv, 2);
  EXPECT_EQ(shape_preset("gemma-3-27b").config.head_dim, 128);
  EXPECT_EQ(shape_preset("gemma-3-27b").config.n_ff, 21504);
}

// At 32k positions a gemma preset's KV cache is far below every layer keeping every position: 50 sliding layers
// keep 1024 - 1 + 512 positions (16 heads of 256, K and V, f16: 16384 bytes a position), the 10 global layers all
// 32768 (4 heads of 512: 8192 bytes).
TEST(ModelShape, GemmaPresetKvCacheAt32k) {
  const ShapePreset p = shape_preset("gemma-4-31b");
  const ModelCost c = model_cost_from_shape(p.config, quant_mix_from_name("q4_k_m"), GgmlType::F16, "gemma-4-31b");
  const uint64_t expected = 50u * 1535 * 16384 + uint64_t{10} * 32768 * 8192;
  EXPECT_EQ(c.kv_cache_bytes(32768), expected);
  EXPECT_EQ(c.kv_cache_bytes(32768), kv_cache_bytes(p.config, 32768, GgmlType::F16));
  uint64_t full = 0;
  for (const auto& l : c.layers) full += l.kv_bytes_per_token * 32768;
  EXPECT_LT(static_cast<double>(c.kv_cache_bytes(32768)), 0.15 * static_cast<double>(full));
  // The MoE and Gemma 3 too.
  for (const char* name : {"gemma-4-26b-a4b", "gemma-3-27b"}) {
    const ShapePreset q = shape_preset(name);
    const ModelCost m = model_cost_from_shape(q.config, quant_mix_from_name("q4_k_m"), GgmlType::F16, name);
    uint64_t all = 0;
    for (const auto& l : m.layers) all += l.kv_bytes_per_token * 32768;
    EXPECT_LT(static_cast<double>(m.kv_cache_bytes(32768)), 0.3 * static_cast<double>(all)) << name;
    EXPECT_EQ(m.kv_cache_bytes(32768), kv_cache_bytes(q.config, 32768, GgmlType::F16)) << name;
  }
}

TEST(ModelShape, UnknownPresetListsNames) {
  try {
    shape_preset("llama-9");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("valid: llama-3.2-1b"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("qwen3-30b-a3b"), std::string::npos) << e.what();
  }
  EXPECT_EQ(shape_preset("Qwen2.5-7B").config.n_embd, 3584);
}

}  // namespace
}  // namespace tessera::plan
