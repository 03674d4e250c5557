// Model costs: a file's costs agree with model_profile; a shape's estimate equals the file gen-model writes for the
// same shape and mix; presets have the published parameter counts and file sizes.
#include <gtest/gtest.h>

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
