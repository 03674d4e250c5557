// gen-model's writer: every architecture and weight type reads back with the requested shapes, types and scales.
#include <gtest/gtest.h>

#include <cmath>

#include "model/model_config.h"
#include "model/quant_mix.h"
#include "model/synthetic_model.h"
#include "model/tensor_layout.h"
#include "support/test_paths.h"
#include "tensor/quant.h"
#include "util/error.h"

namespace tessera {
namespace {

struct Moments {
  double mean = 0;
  double std = 0;
};

Moments moments_of(const gguf::GgufFile& file, const gguf::TensorInfo& t) {
  std::vector<float> row(static_cast<size_t>(t.ne[0]));
  const auto data = file.tensor_data(t);
  const size_t row_bytes = row_size(t.type, t.ne[0]);
  double sum = 0, sum2 = 0;
  int64_t n = 0;
  for (int64_t r = 0; r < t.rows(); ++r) {
    dequantize_row(t.type, data.data() + static_cast<size_t>(r) * row_bytes, row.data(), t.ne[0]);
    for (float v : row) {
      sum += v;
      sum2 += static_cast<double>(v) * v;
      ++n;
    }
  }
  const double mean = sum / static_cast<double>(n);
  return {mean, std::sqrt(sum2 / static_cast<double>(n) - mean * mean)};
}

class SyntheticModel : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(SyntheticModel, ReadsBackWithExpectedLayout) {
  const auto& [arch, type] = GetParam();
  test::TempDir dir;
  SyntheticSpec spec;
  spec.config = preset_config("tiny", arch);
  spec.type = type;
  spec.seed = 7;
  const auto path = dir / "m.gguf";
  const uint64_t bytes = write_synthetic_model(spec, path);
  EXPECT_EQ(bytes, std::filesystem::file_size(path));

  auto file = gguf::GgufFile::open(path);
  auto c = ModelConfig::from_gguf(file);
  EXPECT_EQ(c.arch_name, arch == "mixtral" ? "llama" : arch);
  EXPECT_EQ(c.n_embd, spec.config.n_embd);
  EXPECT_EQ(c.n_layer, spec.config.n_layer);
  EXPECT_EQ(c.n_head_kv, spec.config.n_head_kv);
  EXPECT_EQ(c.n_vocab, spec.config.n_vocab);
  EXPECT_EQ(c.is_moe(), arch == "mixtral" || arch == "qwen3moe");
  EXPECT_EQ(file.metadata().get_u64("general.file_type"), quant_mix_from_name(type).file_type);

  const QuantMix mix = quant_mix_from_name(type);
  const auto specs = expected_tensors(c);
  EXPECT_EQ(file.tensors().size(), specs.size());
  for (const auto& s : specs) {
    const auto* t = file.find_tensor(s.name);
    ASSERT_NE(t, nullptr) << s.name;
    EXPECT_EQ(t->ne, s.ne) << s.name;
    EXPECT_EQ(t->type, tensor_type_for(mix, s, c.n_layer)) << s.name;
  }

  // Scales that keep activations realistic: matrices ~N(0, 1/fan_in), norms ~1.
  const auto& q = file.tensor("blk.0.attn_q.weight");
  const Moments mq = moments_of(file, q);
  const double expected = 1.0 / std::sqrt(static_cast<double>(q.ne[0]));
  EXPECT_NEAR(mq.mean, 0.0, 0.05 * expected);
  EXPECT_NEAR(mq.std, expected, 0.1 * expected) << type;
  const Moments mn = moments_of(file, file.tensor("blk.0.attn_norm.weight"));
  EXPECT_NEAR(mn.mean, 1.0, 0.02);
  EXPECT_NEAR(mn.std, 0.05, 0.02);
}

INSTANTIATE_TEST_SUITE_P(
    AllArchsAndTypes, SyntheticModel,
    ::testing::Combine(::testing::Values("llama", "qwen2", "qwen3", "qwen3moe", "mixtral"),
                       ::testing::Values("f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q2_k", "q3_k_m",
                                         "q4_k_m", "q5_k_m", "q6_k", "iq4_nl", "iq4_xs")),
    [](const auto& param_info) { return std::get<0>(param_info.param) + "_" + std::get<1>(param_info.param); });

TEST(SyntheticModel, DeterministicAcrossRunsAndThreadCounts) {
  test::TempDir dir;
  SyntheticSpec spec;
  spec.config = preset_config("tiny", "qwen3");
  spec.type = "q4_k_m";
  spec.threads = 1;
  write_synthetic_model(spec, dir / "a.gguf");
  spec.threads = 2;
  write_synthetic_model(spec, dir / "b.gguf");
  spec.seed = 43;
  write_synthetic_model(spec, dir / "c.gguf");
  const auto a = test::read_file(dir / "a.gguf");
  EXPECT_EQ(a, test::read_file(dir / "b.gguf"));
  EXPECT_NE(a, test::read_file(dir / "c.gguf"));
}

TEST(SyntheticModel, VocabFromAnotherFile) {
  test::TempDir dir;
  SyntheticSpec spec;
  spec.config = preset_config("tiny", "llama");
  spec.config.n_vocab = 1000;  // replaced by the copied vocabulary's size
  spec.vocab_from = test::shared_dir() / "models/stories260K.gguf";
  write_synthetic_model(spec, dir / "m.gguf");
  auto file = gguf::GgufFile::open(dir / "m.gguf");
  auto src = gguf::GgufFile::open(*spec.vocab_from);
  EXPECT_EQ(ModelConfig::from_gguf(file).n_vocab, 512);
  EXPECT_EQ(file.tensor("token_embd.weight").ne[1], 512);
  EXPECT_EQ(file.metadata().get_array("tokenizer.ggml.tokens"), src.metadata().get_array("tokenizer.ggml.tokens"));
  EXPECT_EQ(file.metadata().get_array("tokenizer.ggml.scores"), src.metadata().get_array("tokenizer.ggml.scores"));
}

TEST(SyntheticModel, Presets) {
  auto b = preset_config("1b", "llama");
  EXPECT_EQ(b.n_embd, 2048);
  EXPECT_EQ(b.n_layer, 22);
  EXPECT_EQ(b.n_head, 32);
  EXPECT_EQ(b.n_head_kv, 4);
  EXPECT_EQ(b.n_ff, 5632);
  EXPECT_EQ(b.n_vocab, 32000);
  auto m = preset_config("moe-small", "qwen3moe");
  EXPECT_EQ(m.n_embd, 2048);
  EXPECT_EQ(m.n_layer, 12);
  EXPECT_EQ(m.head_dim, 128);
  EXPECT_EQ(m.n_expert, 64);
  EXPECT_EQ(m.n_expert_used, 8);
  EXPECT_EQ(m.n_ff_exp, 768);
  EXPECT_THROW(preset_config("huge", "llama"), Error);
  EXPECT_THROW(preset_config("tiny", "gpt2"), Error);
  EXPECT_THROW(quant_mix_from_name("q7_0"), Error);
}

TEST(QuantMix, KQuantMixRules) {
  const QuantMix mix = quant_mix_from_name("Q4_K_M");
  TensorSpec out{"output.weight", TensorRole::Output, -1, {256, 512}, false, false};
  EXPECT_EQ(tensor_type_for(mix, out, 22), GgmlType::Q6_K);
  TensorSpec v{"blk.0.attn_v.weight", TensorRole::AttnV, 0, {2048, 256}, false, false};
  EXPECT_EQ(tensor_type_for(mix, v, 22), GgmlType::Q6_K);  // first eighth
  v.layer = 3;
  EXPECT_EQ(tensor_type_for(mix, v, 22), GgmlType::Q4_K);
  v.layer = 4;  // (4 - 22/8) % 3 == 2
  EXPECT_EQ(tensor_type_for(mix, v, 22), GgmlType::Q6_K);
  TensorSpec norm{"blk.0.attn_norm.weight", TensorRole::AttnNorm, 0, {2048}, true, false};
  EXPECT_EQ(tensor_type_for(mix, norm, 22), GgmlType::F32);
  // A row of 172 elements cannot hold K-quant or 32-element blocks: it falls back to f16.
  TensorSpec odd{"blk.0.ffn_down.weight", TensorRole::FfnDown, 1, {172, 64}, false, false};
  EXPECT_EQ(tensor_type_for(mix, odd, 22), GgmlType::F16);
  TensorSpec exps{"blk.0.ffn_down_exps.weight", TensorRole::FfnDownExps, 1, {64, 256, 8}, false, false};
  EXPECT_EQ(tensor_type_for(quant_mix_from_name("q4_k_s"), exps, 22), GgmlType::Q5_0);
}

}  // namespace
}  // namespace tessera
