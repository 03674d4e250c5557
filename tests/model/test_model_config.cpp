// ModelConfig and ModelProfile on the real files in shared/: hyperparameters, defaults, and bad values.
#include <gtest/gtest.h>

#include "gguf/gguf_writer.h"
#include "model/model_config.h"
#include "model/model_profile.h"
#include "model/tensor_layout.h"
#include "support/test_paths.h"
#include "util/error.h"

namespace tessera {
namespace {

TEST(ModelConfig, Stories260K) {
  auto file = gguf::GgufFile::open(test::shared_dir() / "models/stories260K.gguf");
  auto c = ModelConfig::from_gguf(file);
  EXPECT_EQ(c.arch, Arch::Llama);
  EXPECT_EQ(c.n_layer, 5);
  EXPECT_EQ(c.n_embd, 64);
  EXPECT_EQ(c.n_vocab, 512);
  EXPECT_EQ(c.n_head, 8);
  EXPECT_EQ(c.n_head_kv, 4);
  EXPECT_EQ(c.head_dim, 8);
  EXPECT_EQ(c.n_ff, 172);
  EXPECT_EQ(c.n_rot, 8);
  EXPECT_EQ(c.n_ctx_train, 2048);
  EXPECT_FLOAT_EQ(c.rope_freq_base, 10000.0f);  // key absent: llama.cpp's default
  EXPECT_FLOAT_EQ(c.rms_eps, 1e-5f);
  EXPECT_FALSE(c.tied_output);
  EXPECT_EQ(c.rope_style(), RopeStyle::Norm);

  // Every tensor the architecture expects is in the file with the expected shape.
  for (const auto& spec : expected_tensors(c)) {
    const auto* t = file.find_tensor(spec.name);
    ASSERT_NE(t, nullptr) << spec.name;
    EXPECT_EQ(t->ne, spec.ne) << spec.name;
  }

  auto p = profile_model(file, c);
  EXPECT_EQ(p.weight_bytes, 1171200u);
  ASSERT_EQ(p.layer_bytes.size(), 5u);
  // Per layer: 2 norms of 64 + q 64x64 + k,v 64x32 + o 64x64 + 3 x 64x172, all f32.
  const uint64_t per_layer = 4 * (2 * 64 + 64 * 64 + 2 * 64 * 32 + 64 * 64 + 3 * 64 * 172);
  for (auto b : p.layer_bytes) EXPECT_EQ(b, per_layer);
  EXPECT_EQ(p.embd_bytes, 64u * 512 * 4);
  EXPECT_EQ(kv_bytes_per_token(c, GgmlType::F16), 5u * (32 + 32) * 2);
  auto mem = estimate_memory(p, c, 2048, GgmlType::F32);
  EXPECT_EQ(mem.kv_cache, 5u * 64 * 4 * 2048);
  EXPECT_EQ(mem.weights, p.weight_bytes);
}

TEST(ModelConfig, FixtureArchitectures) {
  struct Case {
    const char* file;
    Arch arch;
    RopeStyle rope;
    int64_t n_expert;
    int64_t n_ff_exp;
    float freq_base;
  };
  const Case cases[] = {
      {"llama-f32.gguf", Arch::Llama, RopeStyle::Norm, 0, 0, 10000.0f},
      {"qwen2-q8_0.gguf", Arch::Qwen2, RopeStyle::Neox, 0, 0, 1e6f},
      {"qwen3-f32.gguf", Arch::Qwen3, RopeStyle::Neox, 0, 0, 1e6f},
      {"qwen3moe-q4_k_m.gguf", Arch::Qwen3Moe, RopeStyle::Neox, 8, 64, 1e6f},
      {"mixtral-f32.gguf", Arch::Llama, RopeStyle::Norm, 4, 256, 1e6f},
  };
  for (const auto& tc : cases) {
    auto file = gguf::GgufFile::open(test::shared_dir() / "fixtures/models" / tc.file);
    auto c = ModelConfig::from_gguf(file);
    EXPECT_EQ(c.arch, tc.arch) << tc.file;
    EXPECT_EQ(c.rope_style(), tc.rope) << tc.file;
    EXPECT_EQ(c.n_embd, 256) << tc.file;
    EXPECT_EQ(c.n_layer, 2) << tc.file;
    EXPECT_EQ(c.head_dim, 64) << tc.file;
    EXPECT_EQ(c.n_vocab, 512) << tc.file;
    EXPECT_EQ(c.n_expert, tc.n_expert) << tc.file;
    EXPECT_EQ(c.n_ff_exp, tc.n_ff_exp) << tc.file;
    EXPECT_FLOAT_EQ(c.rope_freq_base, tc.freq_base) << tc.file;
    for (const auto& spec : expected_tensors(c)) {
      const auto* t = file.find_tensor(spec.name);
      ASSERT_NE(t, nullptr) << tc.file << " " << spec.name;
      EXPECT_EQ(t->ne, spec.ne) << tc.file << " " << spec.name;
    }
    auto p = profile_model(file, c);
    EXPECT_LT(p.decode_bytes_per_token, p.weight_bytes) << tc.file;  // embedding rows (and unused experts) not read
  }
}

// A metadata-only file with the given overrides, for error cases.
std::vector<uint8_t> config_file(const std::function<void(gguf::Metadata&)>& edit) {
  gguf::GgufWriter w;
  ModelConfig c;
  c.n_vocab = 32;
  c.n_ctx_train = 64;
  c.n_embd = 16;
  c.n_layer = 1;
  c.n_head = 4;
  c.n_head_kv = 2;
  c.head_dim = c.head_dim_v = c.n_rot = 4;
  c.n_ff = 32;
  c.to_metadata(w.metadata());
  edit(w.metadata());
  return w.to_bytes();
}

void expect_config_error(const std::function<void(gguf::Metadata&)>& edit, const std::string& needle) {
  auto bytes = config_file(edit);
  auto file = gguf::GgufFile::parse(bytes, "bad.gguf");
  try {
    ModelConfig::from_gguf(file);
    FAIL() << "expected an error containing: " << needle;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("bad.gguf"), std::string::npos) << e.what();
  }
}

TEST(ModelConfig, ValidFileParses) {
  auto bytes = config_file([](gguf::Metadata&) {});
  auto file = gguf::GgufFile::parse(bytes, "ok.gguf");
  auto c = ModelConfig::from_gguf(file);
  EXPECT_EQ(c.n_head_kv, 2);
  EXPECT_TRUE(c.tied_output);  // no output.weight tensor
}

TEST(ModelConfig, BadValuesAreClearErrors) {
  expect_config_error([](auto& md) { md.set("general.architecture", gguf::Value("gpt-j")); },
                      "unsupported architecture 'gpt-j' (supported: llama, qwen2, qwen3, qwen3moe, gemma3, gemma4)");
  expect_config_error([](auto& md) { md.set("llama.attention.head_count_kv", gguf::Value(uint32_t{3})); },
                      "not a multiple of n_head_kv 3");
  expect_config_error([](auto& md) { md.set("llama.block_count", gguf::Value("two")); }, "llama.block_count");
  expect_config_error([](auto& md) { md.set("llama.block_count", gguf::Value(uint32_t{0})); }, "n_layer");
  expect_config_error([](auto& md) { md.set("llama.rope.dimension_count", gguf::Value(uint32_t{5})); },
                      "rope.dimension_count 5");
  expect_config_error([](auto& md) { md.set("llama.rope.scaling.type", gguf::Value("longrope")); },
                      "'longrope' is not one of none, linear, yarn");
  expect_config_error([](auto& md) { md.set("llama.expert_count", gguf::Value(uint32_t{4})); }, "expert_used_count");
}

TEST(ModelConfig, MissingRequiredKeyNamesIt) {
  gguf::GgufWriter w;
  w.set("general.architecture", gguf::Value("llama"));
  w.set("llama.block_count", gguf::Value(uint32_t{2}));
  auto bytes = w.to_bytes();
  auto file = gguf::GgufFile::parse(bytes, "partial.gguf");
  try {
    ModelConfig::from_gguf(file);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'llama.embedding_length' is missing"), std::string::npos) << e.what();
  }
}

TEST(TensorLayout, LayerOfTensor) {
  EXPECT_EQ(layer_of_tensor("blk.12.attn_q.weight"), 12);
  EXPECT_EQ(layer_of_tensor("token_embd.weight"), -1);
  EXPECT_EQ(layer_of_tensor("blk.x.attn_q.weight"), -1);
  EXPECT_EQ(layer_of_tensor("blk.3"), -1);
}

}  // namespace
}  // namespace tessera
