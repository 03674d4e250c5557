// Reading the real GGUF files in ../shared: every file parses, and the key figures of each kind match.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "support/test_paths.h"
#include "util/error.h"

namespace tessera::gguf {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

fs::path models_dir() { return test::shared_dir() / "models"; }

std::vector<fs::path> all_gguf_files() {
  std::vector<fs::path> out;
  for (const auto& root : {test::shared_dir() / "models", test::shared_dir() / "fixtures"}) {
    for (const auto& e : fs::recursive_directory_iterator(root)) {
      if (e.is_regular_file() && e.path().extension() == ".gguf") out.push_back(e.path());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST(GgufReader, EverySharedFileParses) {
  auto files = all_gguf_files();
  // 2 models + 12 vocab files + 10 fixture models + 15 quant fixtures.
  ASSERT_GE(files.size(), 39u);
  for (const auto& path : files) {
    SCOPED_TRACE(path.string());
    // A later file of a split set is parsed alone (opening it is an error: see test_split.cpp).
    const std::string name = path.filename().string();
    const bool later_part = name.find("-of-") != std::string::npos && name.find("-00001-of-") == std::string::npos;
    const std::vector<uint8_t> bytes = later_part ? test::read_file(path) : std::vector<uint8_t>();
    GgufFile f = later_part ? GgufFile::parse(bytes, path.string()) : GgufFile::open(path);
    EXPECT_EQ(f.version(), 3u);
    EXPECT_EQ(f.part_size(0), fs::file_size(path));
    EXPECT_EQ(f.data_offset() % f.alignment(), 0u);
    EXPECT_GT(f.metadata().size(), 0u);
    uint64_t data_bytes = 0;
    for (const auto& t : f.tensors()) {
      auto data = f.tensor_data(t);
      EXPECT_EQ(data.size(), t.n_bytes);
      EXPECT_EQ(f.find_tensor(t.name), &t);
      data_bytes += t.n_bytes;
    }
    if (!f.tensors().empty()) {
      EXPECT_LE(f.data_offset() + data_bytes, f.file_size());
    }
    for (const auto& [key, value] : f.metadata().entries()) EXPECT_FALSE(value.describe().empty()) << key;
  }
}

TEST(GgufReader, Stories260K) {
  auto path = models_dir() / "stories260K.gguf";
  GgufFile f = GgufFile::open(path);
  EXPECT_EQ(f.name(), path.string());
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.metadata().size(), 19u);
  EXPECT_EQ(f.tensors().size(), 48u);
  EXPECT_EQ(f.alignment(), 32u);
  EXPECT_EQ(f.data_offset(), 14176u);
  EXPECT_EQ(f.file_size(), 1185376u);

  const Metadata& m = f.metadata();
  EXPECT_EQ(m.get_string("general.architecture"), "llama");
  EXPECT_EQ(m.get_u64("llama.block_count"), 5u);
  EXPECT_EQ(m.get_u64("llama.embedding_length"), 64u);
  EXPECT_EQ(m.get_u64("llama.feed_forward_length"), 172u);
  EXPECT_EQ(m.get_u64("llama.attention.head_count_kv"), 4u);
  EXPECT_FLOAT_EQ(static_cast<float>(m.get_f64("llama.attention.layer_norm_rms_epsilon")), 1e-5f);
  // The misspelled key is an ordinary key.
  EXPECT_EQ(m.get_u64("tokenizer.ggml.seperator_token_id"), 4294967295u);
  EXPECT_FALSE(m.contains("general.alignment"));
  EXPECT_FALSE(m.contains("llama.rope.freq_base"));
  EXPECT_EQ(m.opt_f64("llama.rope.freq_base"), std::nullopt);
  // Tokenizer arrays come before general.architecture in this file.
  EXPECT_EQ(m.entries().front().first, "tokenizer.ggml.tokens");

  const Value* tokens = m.find("tokenizer.ggml.tokens");
  ASSERT_NE(tokens, nullptr);
  EXPECT_EQ(tokens->array_type(), ValueType::STRING);
  const auto& items = tokens->to_array("tokens");
  ASSERT_EQ(items.size(), 512u);
  EXPECT_EQ(items[0].to_string("t"), "<unk>");
  EXPECT_EQ(items[1].to_string("t"), "<s>");
  EXPECT_EQ(items[3].to_string("t"), "<0x00>");
  EXPECT_EQ(m.find("tokenizer.ggml.scores")->array_type(), ValueType::FLOAT32);
  EXPECT_EQ(m.find("tokenizer.ggml.token_type")->array_type(), ValueType::INT32);
  EXPECT_EQ(m.get_array("tokenizer.ggml.token_type")[3].to_i64("t"), 6);

  const TensorInfo& emb = f.tensor("token_embd.weight");
  EXPECT_EQ(emb.type, GgmlType::F32);
  EXPECT_EQ(emb.ne, (std::vector<int64_t>{64, 512}));
  EXPECT_EQ(emb.n_elements(), 64 * 512);
  EXPECT_EQ(emb.rows(), 512);
  EXPECT_EQ(emb.n_bytes, 64u * 512u * 4u);
  EXPECT_EQ(f.tensor("blk.4.ffn_down.weight").ne, (std::vector<int64_t>{172, 64}));
  EXPECT_EQ(f.tensor("output_norm.weight").ne, (std::vector<int64_t>{64}));
  EXPECT_EQ(f.tensor("output_norm.weight").rows(), 1);
  EXPECT_THAT(
      [&] {
        try {
          f.tensor("blk.9.attn_q.weight");
        } catch (const Error& e) {
          return std::string(e.what());
        }
        return std::string();
      }(),
      HasSubstr("stories260K.gguf: no tensor named 'blk.9.attn_q.weight'"));

  // Tensor data ends exactly at the end of the file.
  uint64_t end = 0;
  for (const auto& t : f.tensors()) end = std::max(end, f.data_offset() + t.offset + t.n_bytes);
  EXPECT_EQ(end, f.file_size());

  // The mapped data matches the file's bytes.
  auto bytes = test::read_file(path);
  auto data = f.tensor_data(emb);
  ASSERT_EQ(data.size(), emb.n_bytes);
  EXPECT_EQ(std::memcmp(data.data(), bytes.data() + f.data_offset() + emb.offset, data.size()), 0);
}

TEST(GgufReader, ParseIsZeroCopy) {
  auto bytes = test::read_file(models_dir() / "stories260K.gguf");
  GgufFile f = GgufFile::parse(bytes, "in-memory");
  EXPECT_EQ(f.name(), "in-memory");
  for (const auto& t : f.tensors()) {
    EXPECT_EQ(f.tensor_data(t).data(), bytes.data() + f.data_offset() + t.offset) << t.name;
  }
  // A TensorInfo that does not belong to the file is refused, not read out of bounds.
  TensorInfo bogus = f.tensors().front();
  bogus.offset = f.file_size();
  EXPECT_THROW(f.tensor_data(bogus), Error);
}

TEST(GgufReader, LlamaTinyRandom) {
  GgufFile f = GgufFile::open(models_dir() / "llama-2-tiny-random.gguf");
  EXPECT_EQ(f.metadata().size(), 18u);
  EXPECT_EQ(f.tensors().size(), 12u);
  EXPECT_EQ(f.data_offset(), 724416u);
  EXPECT_EQ(f.metadata().get_u64("general.file_type"), 1u);
  EXPECT_EQ(f.metadata().get_array("tokenizer.ggml.tokens").size(), 32000u);
  int f16 = 0;
  int f32 = 0;
  for (const auto& t : f.tensors()) {
    if (t.ne.size() == 2) {
      EXPECT_EQ(t.type, GgmlType::F16) << t.name;
      ++f16;
    } else {
      EXPECT_EQ(t.type, GgmlType::F32) << t.name;
      ++f32;
    }
  }
  EXPECT_EQ(f16, 9);
  EXPECT_EQ(f32, 3);
  const TensorInfo& emb = f.tensor("token_embd.weight");
  EXPECT_EQ(emb.ne, (std::vector<int64_t>{8, 32000}));
  EXPECT_EQ(emb.n_bytes, 8u * 32000u * 2u);
}

TEST(GgufReader, VocabOnlyFilesEndBeforeTheAlignedDataOffset) {
  int n = 0;
  for (const auto& e : fs::directory_iterator(models_dir() / "vocab")) {
    if (e.path().extension() != ".gguf") continue;
    SCOPED_TRACE(e.path().string());
    GgufFile f = GgufFile::open(e.path());
    EXPECT_TRUE(f.tensors().empty());
    EXPECT_TRUE(f.metadata().contains("tokenizer.ggml.tokens"));
    ++n;
  }
  EXPECT_EQ(n, 12);
  GgufFile spm = GgufFile::open(models_dir() / "vocab" / "ggml-vocab-llama-spm.gguf");
  EXPECT_EQ(spm.file_size(), 723869u);
  EXPECT_EQ(spm.data_offset(), 723872u);
  EXPECT_GT(spm.data_offset(), spm.file_size());
  EXPECT_FALSE(spm.metadata().contains("tokenizer.ggml.merges"));
  GgufFile gpt2 = GgufFile::open(models_dir() / "vocab" / "ggml-vocab-gpt-2.gguf");
  EXPECT_EQ(gpt2.metadata().get_array("tokenizer.ggml.merges").size(), 50000u);
  EXPECT_EQ(gpt2.metadata().get_string("tokenizer.ggml.pre"), "gpt-2");
  GgufFile baichuan = GgufFile::open(models_dir() / "vocab" / "ggml-vocab-baichuan.gguf");
  EXPECT_EQ(baichuan.metadata().opt_string("tokenizer.ggml.pre"), std::nullopt);
}

TEST(GgufReader, QuantFixtures) {
  auto dir = test::shared_dir() / "fixtures" / "quant";
  GgufFile q = GgufFile::open(dir / "Q4_0.gguf");
  EXPECT_EQ(q.metadata().size(), 3u);
  EXPECT_EQ(q.metadata().get_u64("general.quantization_version"), 2u);
  EXPECT_EQ(q.metadata().get_string("general.name"), "tessera-quant-fixture-Q4_0");
  EXPECT_EQ(q.data_offset(), 320u);
  ASSERT_EQ(q.tensors().size(), 1u);
  const TensorInfo& w = q.tensor("w");
  EXPECT_EQ(w.type, GgmlType::Q4_0);
  EXPECT_EQ(w.ne, (std::vector<int64_t>{256, 8}));
  EXPECT_EQ(w.offset, 0u);
  EXPECT_EQ(w.n_bytes, 8u * 8u * 18u);

  GgufFile k = GgufFile::open(dir / "Q6_K.gguf");
  EXPECT_EQ(k.tensor("w").type, GgmlType::Q6_K);
  EXPECT_EQ(k.tensor("w").n_bytes, 8u * 210u);
  EXPECT_EQ(k.data_offset(), 320u);

  // The F32 fixture's tensor is the source matrix itself.
  GgufFile f32 = GgufFile::open(dir / "F32.gguf");
  EXPECT_EQ(f32.data_offset(), 256u);
  EXPECT_EQ(f32.metadata().size(), 2u);
  auto src = test::read_file(dir / "src.f32");
  auto data = f32.tensor_data(f32.tensor("w"));
  ASSERT_EQ(data.size(), src.size());
  EXPECT_TRUE(std::equal(data.begin(), data.end(), src.begin()));
}

TEST(GgufReader, FixtureModelsMixQuantTypes) {
  GgufFile f = GgufFile::open(test::shared_dir() / "fixtures" / "models" / "qwen3moe-q4_k_m.gguf");
  EXPECT_EQ(f.metadata().get_string("general.architecture"), "qwen3moe");
  int quantized = 0;
  for (const auto& t : f.tensors()) quantized += type_traits(t.type).quantized ? 1 : 0;
  EXPECT_EQ(quantized, 16);  // Q4_K x7, Q8_0 x5, Q5_K x2, Q5_0 x1, Q6_K x1
  EXPECT_EQ(f.tensors().size(), 27u);
}

TEST(GgufReader, BigVocabularyParsesFast) {
  GgufWriter w;
  std::vector<Value> tokens;
  tokens.reserve(150000);
  for (int i = 0; i < 150000; ++i) tokens.emplace_back(fmt::format("tok{}_{}", i, std::string(i % 13, 'x')));
  w.set("tokenizer.ggml.tokens", Value::array(ValueType::STRING, std::move(tokens)));
  auto bytes = w.to_bytes();
  double best_ms = 1e9;
  for (int rep = 0; rep < 3; ++rep) {
    auto t0 = std::chrono::steady_clock::now();
    GgufFile f = GgufFile::parse(bytes, "vocab");
    auto ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    best_ms = std::min(best_ms, ms);
    ASSERT_EQ(f.metadata().get_array("tokenizer.ggml.tokens").size(), 150000u);
    EXPECT_EQ(f.metadata().get_array("tokenizer.ggml.tokens")[149999].to_string("t"),
              "tok149999_" + std::string(149999 % 13, 'x'));
  }
  EXPECT_LT(best_ms, 100.0);
}

}  // namespace
}  // namespace tessera::gguf
