// gen-model's writer: every architecture and weight type reads back with the requested shapes, types and scales.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "model/model_config.h"
#include "model/quant_mix.h"
#include "model/stage.h"
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

// Gemma presets: "gemma3", "gemma4" (dense: sliding + global layers, per-layer inputs, shared K/V) and
// "gemma4moe" (experts beside a dense MLP, V = K on global layers).
struct GemmaCase {
  std::string model;  // gemma3, gemma4, gemma4moe
  std::string type;
  std::string arch() const { return model == "gemma3" ? "gemma3" : "gemma4"; }
  bool moe() const { return model == "gemma4moe"; }
  std::string fixture() const { return model + "-f32.gguf"; }  // README_gemma.md's file of the same layout
};

void expect_same_layers(const ModelConfig& got, const ModelConfig& want) {
  ASSERT_EQ(got.n_layer, want.n_layer);
  for (int64_t il = 0; il < want.n_layer; ++il) {
    const LayerShape g = got.layer(il), w = want.layer(il);
    EXPECT_EQ(g.n_head, w.n_head) << il;
    EXPECT_EQ(g.n_head_kv, w.n_head_kv) << il;
    EXPECT_EQ(g.head_dim, w.head_dim) << il;
    EXPECT_EQ(g.head_dim_v, w.head_dim_v) << il;
    EXPECT_EQ(g.n_rot, w.n_rot) << il;
    EXPECT_EQ(g.n_ff, w.n_ff) << il;
    EXPECT_EQ(g.window, w.window) << il;
    EXPECT_EQ(g.kv_source, w.kv_source) << il;
    EXPECT_EQ(g.rope_base, w.rope_base) << il;
    EXPECT_EQ(g.rope_freq_scale, w.rope_freq_scale) << il;
    EXPECT_EQ(g.rope_factors, w.rope_factors) << il;
    EXPECT_EQ(g.moe, w.moe) << il;
    EXPECT_EQ(g.has_v, w.has_v) << il;
  }
}

// The prompt in one batch, then greedy steps: every logit finite, and a model that neither repeats one token nor
// echoes its input (what badly scaled Gemma weights do: the scaled input embedding drowns the stream).
void expect_sane_outputs(const std::filesystem::path& path, const std::string& what) {
  ThreadPool pool(2);
  Stage stage(ModelWeights::load(path), StageOptions{1, 256, GgmlType::F32}, pool);
  const int64_t n_vocab = stage.config().n_vocab;
  std::vector<int32_t> prompt;
  for (int32_t i = 0; i < 24; ++i) prompt.push_back(static_cast<int32_t>(3 + (i * 37) % (n_vocab - 3)));
  Batch batch;
  for (size_t i = 0; i < prompt.size(); ++i) batch.add(prompt[i], 0, static_cast<int32_t>(i), true);
  StageOutput out;
  stage.forward(batch, nullptr, out);
  ASSERT_EQ(out.logits.size(), prompt.size() * static_cast<size_t>(n_vocab));
  auto argmax = [&](const float* x) { return static_cast<int32_t>(std::max_element(x, x + n_vocab) - x); };
  std::set<int32_t> predicted;
  int echoes = 0;
  double sum = 0, sum2 = 0;
  for (size_t i = 0; i < prompt.size(); ++i) {
    const float* row = out.logits.data() + i * static_cast<size_t>(n_vocab);
    for (int64_t v = 0; v < n_vocab; ++v) {
      ASSERT_TRUE(std::isfinite(row[v])) << what << " position " << i;
      sum += row[v];
      sum2 += static_cast<double>(row[v]) * row[v];
    }
    predicted.insert(argmax(row));
    echoes += argmax(row) == prompt[i];
  }
  const double n = static_cast<double>(out.logits.size());
  const double sd = std::sqrt(sum2 / n - (sum / n) * (sum / n));
  EXPECT_GT(sd, 0.2) << what;  // the fixtures' logits: about 1
  EXPECT_LT(sd, 10.0) << what;
  EXPECT_GE(predicted.size(), 4u) << what;
  EXPECT_LE(echoes, 4) << what;

  std::vector<int32_t> greedy;
  int32_t next = argmax(out.logits.data() + (prompt.size() - 1) * static_cast<size_t>(n_vocab));
  for (int32_t pos = static_cast<int32_t>(prompt.size()); greedy.size() < 8; ++pos) {
    greedy.push_back(next);
    Batch b;
    b.add(next, 0, pos, true);
    stage.forward(b, nullptr, out);
    for (float v : out.logits) ASSERT_TRUE(std::isfinite(v)) << what << " step " << greedy.size();
    next = argmax(out.logits.data());
  }
  const size_t distinct = std::set<int32_t>(greedy.begin(), greedy.end()).size();
  EXPECT_GE(distinct, 2u) << what;
  std::printf("%s: logit sd %.3f, %zu distinct argmaxes over the prompt, %d echoes, %zu distinct greedy tokens\n",
              what.c_str(), sd, predicted.size(), echoes, distinct);
}

class SyntheticGemma : public ::testing::TestWithParam<GemmaCase> {};

TEST_P(SyntheticGemma, LoadsBackWithTheFixturesKeysAndRuns) {
  const GemmaCase& g = GetParam();
  test::TempDir dir;
  SyntheticSpec spec;
  spec.config = preset_config("tiny", g.arch(), g.moe());
  spec.type = g.type;
  spec.threads = 2;
  const auto path = dir / "m.gguf";
  write_synthetic_model(spec, path);

  // The config round-trips: every layer's shape, and what the layer shapes do not show.
  auto file = gguf::GgufFile::open(path);
  const ModelConfig c = ModelConfig::from_gguf(file);
  const ModelConfig& want = spec.config;
  EXPECT_EQ(c.arch, want.arch);
  EXPECT_EQ(c.n_embd, want.n_embd);
  EXPECT_EQ(c.n_vocab, want.n_vocab);
  EXPECT_EQ(c.n_head_kv, want.n_head_kv);
  EXPECT_EQ(c.n_ff, want.n_ff);
  EXPECT_EQ(c.n_expert, want.n_expert);
  EXPECT_EQ(c.n_expert_used, want.n_expert_used);
  EXPECT_EQ(c.n_ff_exp, want.n_ff_exp);
  EXPECT_EQ(c.n_swa, want.n_swa);
  EXPECT_EQ(c.swa_period, want.swa_period);
  EXPECT_EQ(c.swa_layers, want.swa_layers);
  EXPECT_EQ(c.n_head_kv_layers, want.n_head_kv_layers);
  EXPECT_EQ(c.n_ff_layers, want.n_ff_layers);
  EXPECT_EQ(c.shared_kv_layers, want.shared_kv_layers);
  EXPECT_EQ(c.n_embd_per_layer, want.n_embd_per_layer);
  EXPECT_EQ(c.attn_k_eq_v, want.attn_k_eq_v);
  EXPECT_EQ(c.final_logit_softcap, want.final_logit_softcap);
  EXPECT_TRUE(c.tied_output);
  EXPECT_EQ(c.has_rope_freqs, want.has_rope_freqs);
  expect_same_layers(c, want);

  // The presets exercise what the issue asks of them.
  bool any_swa = false, any_global = false;
  for (int64_t il = 0; il < c.n_layer; ++il) (c.layer(il).is_swa() ? any_swa : any_global) = true;
  EXPECT_TRUE(any_swa && any_global);
  if (g.model == "gemma4") {
    EXPECT_GT(c.n_embd_per_layer, 0);
    EXPECT_GT(c.shared_kv_layers, 0);
  }
  if (g.moe()) {
    EXPECT_TRUE(c.is_moe());
    EXPECT_TRUE(c.attn_k_eq_v);
  }

  // Every key of the fixture with the same layout is there with the fixture's type (llama.cpp reads some keys only
  // as one type: gemma3's pattern as a u32 scalar, gemma4's as a bool array).
  const auto fixture = gguf::GgufFile::open(test::shared_dir() / "fixtures/models" / g.fixture());
  const std::string prefix = g.arch() + ".";
  int keys = 0;
  for (const auto& [key, value] : fixture.metadata().entries()) {
    if (!key.starts_with(prefix)) continue;
    const gguf::Value* mine = file.metadata().find(key);
    ASSERT_NE(mine, nullptr) << key;
    EXPECT_EQ(mine->type(), value.type()) << key;
    if (value.type() == gguf::ValueType::ARRAY) {
      EXPECT_EQ(mine->array_type(), value.array_type()) << key;
      EXPECT_EQ(mine->to_array(key).size(), static_cast<size_t>(c.n_layer)) << key;
    }
    ++keys;
  }
  EXPECT_GE(keys, 14);

  // The tensors: the layout's names and shapes (no output.weight: tied), the mix's types, vectors in F32, and the
  // fixture's tensor names where the layer kinds match.
  const QuantMix mix = quant_mix_from_name(g.type);
  size_t n_expected = 0;
  for (const auto& s : expected_tensors(c)) {
    if (s.role == TensorRole::Output) {
      EXPECT_EQ(file.find_tensor(s.name), nullptr);
      continue;
    }
    ++n_expected;
    const auto* t = file.find_tensor(s.name);
    ASSERT_NE(t, nullptr) << s.name;
    EXPECT_EQ(t->ne, s.ne) << s.name;
    EXPECT_EQ(t->type, tensor_type_for(mix, s, c.n_layer, true)) << s.name;
    if (s.is_vector || s.role == TensorRole::FfnGateInp) {
      EXPECT_EQ(t->type, GgmlType::F32) << s.name;
    }
  }
  EXPECT_EQ(file.tensors().size(), n_expected);
  std::set<std::string> suffixes, fixture_suffixes;
  auto suffix = [](const std::string& name) { return name.substr(name.find('.', 4) + 1); };
  for (const auto& t : file.tensors()) suffixes.insert(layer_of_tensor(t.name) >= 0 ? suffix(t.name) : t.name);
  for (const auto& t : fixture.tensors())
    fixture_suffixes.insert(layer_of_tensor(t.name) >= 0 ? suffix(t.name) : t.name);
  EXPECT_EQ(suffixes, fixture_suffixes);
  if (type_traits(mix.base).quantized && mix.base != GgmlType::Q8_0) {
    EXPECT_EQ(file.tensor("token_embd.weight").type, GgmlType::Q6_K);  // the tied head's type
  }

  // Gemma's scales (README_gemma.md 2): the residual-side norms about 8, the token embedding N(0, 1/n_embd).
  const Moments post = moments_of(file, file.tensor("blk.0.post_attention_norm.weight"));
  EXPECT_NEAR(post.mean, 8.0, 0.2);
  const Moments emb = moments_of(file, file.tensor("token_embd.weight"));
  EXPECT_NEAR(emb.std, 1.0 / std::sqrt(static_cast<double>(c.n_embd)), 0.15 / std::sqrt(static_cast<double>(c.n_embd)));
  if (c.arch == Arch::Gemma4) {
    const Moments qn = moments_of(file, file.tensor("blk.0.attn_q_norm.weight"));
    EXPECT_NEAR(qn.mean, std::pow(static_cast<double>(c.layer(0).head_dim), -0.25), 0.02);
    const auto& rf = file.tensor("rope_freqs.weight");
    std::vector<float> f(static_cast<size_t>(rf.ne[0]));
    dequantize_row(rf.type, file.tensor_data(rf).data(), f.data(), rf.ne[0]);
    EXPECT_EQ(std::count(f.begin(), f.end(), 1.0f), rf.ne[0] / 4);
    EXPECT_EQ(std::count(f.begin(), f.end(), 1e30f), rf.ne[0] - rf.ne[0] / 4);
  }

  expect_sane_outputs(path, g.model + " " + g.type);
}

INSTANTIATE_TEST_SUITE_P(Presets, SyntheticGemma,
                         ::testing::Values(GemmaCase{"gemma3", "f32"}, GemmaCase{"gemma3", "q8_0"},
                                           GemmaCase{"gemma3", "q4_k_m"}, GemmaCase{"gemma4", "f32"},
                                           GemmaCase{"gemma4", "q8_0"}, GemmaCase{"gemma4", "q4_k_m"},
                                           GemmaCase{"gemma4moe", "f32"}, GemmaCase{"gemma4moe", "q8_0"},
                                           GemmaCase{"gemma4moe", "q4_k_m"}),
                         [](const auto& param_info) { return param_info.param.model + "_" + param_info.param.type; });

// The larger presets' shapes (not written here: hundreds of MB) are valid and have the real models' layouts.
TEST(SyntheticGemma, LargerPresets) {
  const auto g3 = preset_config("1b", "gemma3");
  EXPECT_EQ(g3.n_embd, 1152);
  EXPECT_EQ(g3.n_layer, 26);
  EXPECT_EQ(g3.n_vocab, 262144);
  EXPECT_TRUE(g3.layer(0).is_swa());
  EXPECT_TRUE(g3.layer(4).is_swa());
  EXPECT_FALSE(g3.layer(5).is_swa());
  const auto e = preset_config("1b", "gemma4");
  EXPECT_EQ(e.n_embd_per_layer, 256);
  EXPECT_EQ(e.shared_kv_layers, 10);
  EXPECT_EQ(e.layer(19).kv_source, 9);  // the last layer is global: it reads the last global layer with K/V
  EXPECT_EQ(e.layer(18).kv_source, 8);
  EXPECT_EQ(e.layer(12).n_ff, 2 * e.layer(0).n_ff);
  const auto m = preset_config("moe-small", "gemma4");
  EXPECT_EQ(m.n_expert, 128);
  EXPECT_EQ(m.n_expert_used, 8);
  EXPECT_TRUE(m.attn_k_eq_v);
  EXPECT_EQ(m.layer(5).is_swa(), false);
  EXPECT_EQ(m.layer(11).is_swa(), false);
  EXPECT_EQ(m.layer(0).head_dim * 2, m.layer(5).head_dim);
  for (const auto* c : {&g3, &e, &m}) EXPECT_NO_THROW(c->validate("preset"));
  EXPECT_EQ(m.name, "tessera-synthetic-gemma4-moe-small");
  EXPECT_THROW(preset_config("tiny", "gemma3", true), Error);
  EXPECT_THROW(preset_config("moe-small", "gemma3"), Error);
  EXPECT_THROW(preset_config("1b", "gemma4", true), Error);
  EXPECT_THROW(preset_config("tiny", "llama", true), Error);
}

// gen-model's explicit dimensions on a gemma4 preset keep its layout: the pattern's period, the shared-K/V start
// that llama.cpp accepts (the layer before it global, the one before that sliding), the double-width shared FFNs.
TEST(SyntheticGemma, FitLayersAfterExplicitDimensions) {
  const ModelConfig like = preset_config("1b", "gemma4");
  ModelConfig c = like;
  c.n_layer = 12;
  fit_gemma4_layers(c, like, std::nullopt, int64_t{1024});
  EXPECT_EQ(c.swa_layers.size(), 12u);
  EXPECT_FALSE(c.swa_layers[4]);
  EXPECT_FALSE(c.swa_layers[9]);
  const int64_t start = c.kv_share_start();
  ASSERT_GT(c.shared_kv_layers, 0);
  EXPECT_FALSE(c.swa_layers[static_cast<size_t>(start - 1)]);
  EXPECT_TRUE(c.swa_layers[static_cast<size_t>(start - 2)]);
  EXPECT_EQ(c.n_ff_layers.front(), 1024);
  EXPECT_EQ(c.n_ff_layers.back(), 2048);
  EXPECT_EQ(c.n_ff, 2048);
  EXPECT_NO_THROW(c.validate("fit"));
  ModelConfig m = preset_config("moe-small", "gemma4");
  const ModelConfig mlike = m;
  m.n_layer = 4;
  m.n_head_kv = 2;
  fit_gemma4_layers(m, mlike, int64_t{2}, std::nullopt);
  EXPECT_EQ(m.n_head_kv_layers, (std::vector<int64_t>{2, 2, 2, 2}));
  EXPECT_TRUE(m.n_ff_layers.empty());
  EXPECT_NO_THROW(m.validate("fit"));
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
  // A tied head: token_embd is the output matrix and gets its type; Gemma 4's fused experts the FFN's.
  TensorSpec emb{"token_embd.weight", TensorRole::TokenEmbd, -1, {256, 512}, false, false};
  EXPECT_EQ(tensor_type_for(mix, emb, 22), GgmlType::Q4_K);
  EXPECT_EQ(tensor_type_for(mix, emb, 22, true), GgmlType::Q6_K);
  EXPECT_EQ(tensor_type_for(quant_mix_from_name("q8_0"), emb, 22, true), GgmlType::Q8_0);
  TensorSpec gate_up{"blk.0.ffn_gate_up_exps.weight", TensorRole::FfnGateUpExps, 0, {256, 128, 8}, false, false};
  EXPECT_EQ(tensor_type_for(mix, gate_up, 22), GgmlType::Q4_K);
}

}  // namespace
}  // namespace tessera
