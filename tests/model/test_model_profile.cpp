// ModelProfile and the KV memory of the gemma fixtures, with every number worked out by hand from README_gemma.md's
// per-layer tables: sliding-window layers keep a ring, layers that reuse K/V keep none, per-layer embeddings and
// experts are read one row / k of n per token.
#include <gtest/gtest.h>

#include "model/kv_cache.h"
#include "model/model_config.h"
#include "model/model_profile.h"
#include "support/test_paths.h"

namespace tessera {
namespace {

struct Fixture {
  gguf::GgufFile file;
  ModelConfig config;
};

Fixture open_fixture(const std::string& name) {
  auto file = gguf::GgufFile::open(test::shared_dir() / "fixtures/models" / (name + ".gguf"));
  ModelConfig config = ModelConfig::from_gguf(file);
  return {std::move(file), std::move(config)};
}

// gemma4-f32: layers 0, 1 sliding (window 8, 2 KV heads of 32: 128 K+V values a position), 2 global (1 KV head of
// 64, V = K but stored: 128 values), 3 reuses 1, 4 reuses 2. F16: 2 bytes a value. A ring keeps 8 - 1 + 512 = 519.
TEST(ModelProfile, Gemma4KvCacheKeepsRingsAndNoneForSharedLayers) {
  const Fixture f = open_fixture("gemma4-f32");
  const ModelConfig& c = f.config;
  // Every layer with a cache of its own, one position: 3 x 128 values x 2 bytes.
  EXPECT_EQ(kv_bytes_per_token(c, GgmlType::F16), 3u * 128 * 2);

  // At 256 positions no ring is shorter than the context.
  EXPECT_EQ(kv_cache_bytes(c, 256, GgmlType::F16), 3u * 128 * 256 * 2);
  // At 4096: the two sliding layers keep 519 positions, the global one 4096; layers 3 and 4 none.
  const uint64_t at_4096 = 2u * 128 * 519 * 2 + 128u * 4096 * 2;
  EXPECT_EQ(at_4096, 1314304u);
  EXPECT_EQ(kv_cache_bytes(c, 4096, GgmlType::F16), at_4096);
  EXPECT_LT(kv_cache_bytes(c, 4096, GgmlType::F16), kv_bytes_per_token(c, GgmlType::F16) * 4096);
  EXPECT_EQ(kv_cache_bytes(c, 4096, GgmlType::F16, 3), 3 * at_4096);  // per sequence
  EXPECT_EQ(kv_cache_bytes(c, 4096, GgmlType::F16), kv_cache_config(c, 0, c.n_layer, 1, 4096, GgmlType::F16).bytes());

  const ModelProfile p = profile_model(f.file, c);
  EXPECT_EQ(estimate_memory(p, c, 4096, GgmlType::F16).kv_cache, at_4096);
  EXPECT_EQ(estimate_memory(p, c, 256, GgmlType::F32).kv_cache, 3u * 128 * 256 * 4);

  const std::vector<KvLayerType> types = kv_layer_types(c, 4096, GgmlType::F16);
  ASSERT_EQ(types.size(), 2u);
  EXPECT_EQ(types[0].window, 0);  // global first
  EXPECT_EQ(types[0].n_head_kv, 1);
  EXPECT_EQ(types[0].head_dim_k, 64);
  EXPECT_EQ(types[0].n_layers, 1);
  EXPECT_EQ(types[0].n_reusing, 1);
  EXPECT_EQ(types[0].n_cells, 4096);
  EXPECT_EQ(types[0].bytes, 128u * 4096 * 2);
  EXPECT_EQ(types[1].window, 8);
  EXPECT_EQ(types[1].n_head_kv, 2);
  EXPECT_EQ(types[1].head_dim_k, 32);
  EXPECT_EQ(types[1].n_layers, 2);
  EXPECT_EQ(types[1].n_reusing, 1);
  EXPECT_EQ(types[1].n_cells, 519);
  EXPECT_EQ(types[1].bytes, 2u * 128 * 519 * 2);
  EXPECT_EQ(kv_layer_types(c, 256, GgmlType::F16)[1].n_cells, 256);
}

// gemma3-f32: five sliding layers (window 8) and a global one, 2 KV heads of 32 each.
TEST(ModelProfile, Gemma3KvCache) {
  const Fixture f = open_fixture("gemma3-f32");
  EXPECT_EQ(kv_cache_bytes(f.config, 256, GgmlType::F16), 6u * 128 * 256 * 2);
  EXPECT_EQ(kv_cache_bytes(f.config, 2048, GgmlType::F16), 5u * 128 * 519 * 2 + 128u * 2048 * 2);
  const auto types = kv_layer_types(f.config, 2048, GgmlType::F16);
  ASSERT_EQ(types.size(), 2u);
  EXPECT_EQ(types[0].n_layers, 1);
  EXPECT_EQ(types[1].n_layers, 5);
  EXPECT_EQ(types[1].n_reusing, 0);
}

// A model without sliding layers: the cache is the old per-token figure times the context.
TEST(ModelProfile, DenseKvCacheIsPerTokenTimesContext) {
  const Fixture f = open_fixture("qwen3-f32");
  EXPECT_EQ(kv_cache_bytes(f.config, 3000, GgmlType::F16), kv_bytes_per_token(f.config, GgmlType::F16) * 3000);
  ASSERT_EQ(kv_layer_types(f.config, 3000, GgmlType::F16).size(), 1u);
  EXPECT_EQ(kv_layer_types(f.config, 3000, GgmlType::F16)[0].n_layers, f.config.n_layer);
}

// gemma4-f32 per token: per_layer_token_embd [160, 512] f32 is read one 640-byte row (not 327680 bytes), token_embd
// one 1024-byte row, and the tied head the whole 524288-byte table. FLOPs: the blocks' matrices, the head and
// per_layer_model_proj [256, 160].
TEST(ModelProfile, Gemma4PerLayerEmbeddingReadByRow) {
  const Fixture f = open_fixture("gemma4-f32");
  const ModelProfile p = profile_model(f.file, f.config);
  EXPECT_EQ(p.per_layer_embd_bytes, 160u * 512 * 4);
  EXPECT_EQ(p.embd_bytes, 256u * 512 * 4);
  EXPECT_EQ(p.decode_bytes_per_token, p.weight_bytes - 160u * 512 * 4 + 640 + 1024);
  // Matrices per block (README_gemma.md section 2): blocks 0-1 212992 elements each, 2 262144, 3 278528, 4 344064.
  const uint64_t blocks = 2 * 212992 + 262144 + 278528 + 344064;
  EXPECT_EQ(p.flops_per_token, 2 * (blocks + 256 * 512 + 256 * 160));
}

// gemma4moe-f32: 8 experts, 2 used. Per layer the fused ffn_gate_up_exps [256, 64, 8], ffn_down_exps [32, 256, 8]
// and ffn_down_exps.scale [8] are 786464 bytes; a token reads 2/8 of them and the whole dense MLP beside them.
TEST(ModelProfile, Gemma4MoeReadsKOfNExperts) {
  const Fixture f = open_fixture("gemma4moe-f32");
  const ModelProfile p = profile_model(f.file, f.config);
  EXPECT_EQ(p.expert_bytes_per_layer, 786464u);
  const uint64_t unused = 4 * 786464 / 8 * 6;
  EXPECT_EQ(p.decode_bytes_per_token, p.weight_bytes - unused + 1024);
  // Per layer: q, k, (v), o, the dense gate/up/down (3 x 256 x 128), the router (256 x 8), and 2 of 8 experts.
  const uint64_t experts = 2 * (256 * 64 + 32 * 256);
  const uint64_t dense_ffn = 3 * 256 * 128 + 256 * 8;
  const uint64_t sliding_attn = 256 * 128 + 2 * 256 * 64 + 128 * 256;  // layers 0, 2
  const uint64_t global_attn = 256 * 256 + 256 * 64 + 256 * 256;       // layers 1, 3 (no attn_v)
  const uint64_t blocks = 2 * sliding_attn + 2 * global_attn + 4 * (dense_ffn + experts);
  EXPECT_EQ(p.flops_per_token, 2 * (blocks + 256 * 512));
}

}  // namespace
}  // namespace tessera
