// llama.cpp's tokenizer test vectors on the real vocab-only GGUF files: exact ids for llama-spm, phi-3 and gpt-2,
// and decode(encode(text)) == text for every llama/gpt2 vocab; BERT vocabs are rejected clearly.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "support/test_paths.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace tessera {
namespace {

std::filesystem::path vocab_path(const std::string& name) {
  return test::shared_dir() / "models" / "vocab" / ("ggml-vocab-" + name + ".gguf");
}

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in) << "cannot open " << path;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The .inp format: every case ends with the separator, so the piece after the last one is empty and dropped.
std::vector<std::string> read_cases(const std::filesystem::path& path) {
  const std::string text = read_text(path);
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> cases;
  size_t start = 0;
  for (size_t pos = text.find(sep); pos != std::string::npos; pos = text.find(sep, start)) {
    cases.push_back(text.substr(start, pos - start));
    start = pos + sep.size();
  }
  EXPECT_EQ(start, text.size()) << "text after the last separator in " << path;
  return cases;
}

std::vector<std::vector<TokenId>> read_expected(const std::filesystem::path& path) {
  std::vector<std::vector<TokenId>> out;
  std::istringstream in(read_text(path));
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ids(line);
    std::vector<TokenId> row;
    for (TokenId id = 0; ids >> id;) row.push_back(id);
    out.push_back(row);
  }
  return out;
}

std::unique_ptr<Tokenizer> load(const std::string& name) {
  const gguf::GgufFile file = gguf::GgufFile::open(vocab_path(name));
  return Tokenizer::from_metadata(file.metadata());
}

std::string ids_to_string(const std::vector<TokenId>& ids) {
  std::string s;
  for (TokenId id : ids) {
    s += ' ';
    s += std::to_string(id);
  }
  return s;
}

// "deepseek-llm" -> "deepseek_llm": test names must be identifiers.
std::string param_name(const ::testing::TestParamInfo<std::string>& param) {
  std::string s = param.param;
  for (char& c : s) c = (c == '-') ? '_' : c;
  return s;
}

class tokenizerVocabVectors : public ::testing::TestWithParam<std::string> {};

TEST_P(tokenizerVocabVectors, EncodesAllCasesExactly) {
  const std::string name = GetParam();
  const auto tok = load(name);
  const auto cases = read_cases(vocab_path(name).string() + ".inp");
  const auto expected = read_expected(vocab_path(name).string() + ".out");
  ASSERT_EQ(cases.size(), 46u);
  ASSERT_EQ(expected.size(), cases.size());
  int passed = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::vector<TokenId> got = tok->encode(cases[i], /*add_special=*/false, /*parse_special=*/false);
    EXPECT_EQ(got, expected[i]) << name << " case " << i << " '" << cases[i] << "'\n got:     " << ids_to_string(got)
                                << "\n expected:" << ids_to_string(expected[i]);
    passed += got == expected[i] ? 1 : 0;
  }
  std::cout << "[ vectors  ] " << name << ": " << passed << "/" << cases.size() << " cases match\n";
}

INSTANTIATE_TEST_SUITE_P(Vocabs, tokenizerVocabVectors, ::testing::Values("llama-spm", "phi-3", "gpt-2"), param_name);

class tokenizerVocabRoundTrip : public ::testing::TestWithParam<std::string> {};

TEST_P(tokenizerVocabRoundTrip, DecodeOfEncodeGivesTheInputBack) {
  const std::string name = GetParam();
  const auto tok = load(name);
  // Every .inp file holds the same text; use the llama-spm copy for vocabs whose vectors are not kept.
  const auto cases = read_cases(vocab_path("llama-spm").string() + ".inp");
  ASSERT_EQ(cases.size(), 46u);
  int passed = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::vector<TokenId> ids = tok->encode(cases[i], false, false);
    const std::string back = tok->decode(ids);
    EXPECT_EQ(back, cases[i]) << name << " case " << i << " ids:" << ids_to_string(ids);
    passed += back == cases[i] ? 1 : 0;
  }
  std::cout << "[ roundtrip] " << name << ": " << passed << "/" << cases.size() << " cases round-trip\n";
}

INSTANTIATE_TEST_SUITE_P(Vocabs, tokenizerVocabRoundTrip,
                         ::testing::Values("baichuan", "deepseek-coder", "deepseek-llm", "falcon", "gpt-2", "gpt-neox",
                                           "llama-spm", "mpt", "phi-3", "refact", "starcoder"),
                         param_name);

TEST(tokenizerVocabFiles, BertIsRejectedWithAClearError) {
  try {
    load("bert-bge");
    FAIL() << "the bert vocab was accepted";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "unsupported tokenizer model 'bert' (supported: llama, gpt2)");
  }
}

TEST(tokenizerVocabFiles, SpecialIdsAndFlagsFromMetadata) {
  const auto spm = load("llama-spm");
  EXPECT_EQ(spm->n_vocab(), 32000);
  EXPECT_EQ(spm->bos(), 1);
  EXPECT_EQ(spm->eos(), 2);
  EXPECT_TRUE(spm->add_bos());
  EXPECT_FALSE(spm->add_eos());
  EXPECT_TRUE(spm->is_eog(2));
  EXPECT_FALSE(spm->eot().has_value());

  const auto phi3 = load("phi-3");
  EXPECT_EQ(phi3->eos(), 32000);
  ASSERT_TRUE(phi3->eot().has_value());
  EXPECT_EQ(phi3->token_text(*phi3->eot()), "<|end|>");
  EXPECT_TRUE(phi3->is_eog(32000));   // <|endoftext|>
  EXPECT_TRUE(phi3->is_eog(32007));   // <|end|>
  EXPECT_FALSE(phi3->is_eog(32010));  // <|user|>
  EXPECT_TRUE(phi3->is_control(32010));

  const auto gpt2 = load("gpt-2");
  EXPECT_EQ(gpt2->bos(), 50256);
  EXPECT_FALSE(gpt2->add_bos());  // absent key: llama.cpp's BPE default
  EXPECT_TRUE(gpt2->is_eog(50256));

  const auto coder = load("deepseek-coder");
  EXPECT_TRUE(coder->add_bos());
  EXPECT_EQ(coder->encode("hi", true, false).front(), 32013);
}

TEST(tokenizerVocabFiles, ParseSpecialOnRealVocabs) {
  const auto phi3 = load("phi-3");
  const auto with = phi3->encode("<|user|>\nHi<|end|>", false, true);
  ASSERT_GE(with.size(), 3u);
  EXPECT_EQ(with.front(), 32010);
  EXPECT_EQ(with.back(), 32007);
  const auto without = phi3->encode("<|user|>", false, false);
  EXPECT_GT(without.size(), 1u);
  EXPECT_EQ(phi3->decode(without), "<|user|>");
  // Control tokens print nothing unless asked to.
  EXPECT_EQ(phi3->decode(with, false).find("<|user|>"), std::string::npos);
  EXPECT_EQ(phi3->decode(with, true).rfind("<|user|>", 0), 0u);

  const auto gpt2 = load("gpt-2");
  EXPECT_EQ(gpt2->encode("a<|endoftext|>", false, true), (std::vector<TokenId>{64, 50256}));
  EXPECT_NE(gpt2->encode("a<|endoftext|>", false, false).back(), 50256);
}

TEST(tokenizerVocabFiles, UserDefinedTokensMatchEvenWithoutParseSpecial) {
  // gpt-neox stores runs of spaces as user-defined tokens; Hugging Face and llama.cpp always match those.
  const auto neox = load("gpt-neox");
  const auto ids = neox->encode("a    b", false, false);
  const auto four_spaces = neox->find_token("    ");
  ASSERT_TRUE(four_spaces.has_value());
  EXPECT_NE(std::find(ids.begin(), ids.end(), *four_spaces), ids.end()) << ids_to_string(ids);
  EXPECT_EQ(neox->decode(ids), "a    b");
}

TEST(tokenizerVocabFiles, Stories260KEncodesTheReferencePrompt) {
  const gguf::GgufFile file = gguf::GgufFile::open(test::shared_dir() / "models" / "stories260K.gguf");
  const auto tok = Tokenizer::from_metadata(file.metadata());
  EXPECT_EQ(tok->n_vocab(), 512);
  const std::string prompt = "Once upon a time there was a little girl named Lily";
  const auto ids = tok->encode(prompt, /*add_special=*/true, /*parse_special=*/false);
  EXPECT_EQ(ids, (std::vector<TokenId>{1, 403, 407, 261, 378, 383, 286, 261, 376, 298, 315, 421, 395, 317}));
  // BOS takes the first-token space rule, exactly as llama.cpp's detokenizer does.
  EXPECT_EQ(tok->decode(ids), " " + prompt);
  EXPECT_EQ(tok->decode(std::span(ids).subspan(1)), prompt);
  // 0xFFFFFFFF separator/padding ids mean "none" and load fine; byte fallback covers characters outside 512 tokens.
  const auto emoji = tok->encode("🦙", false, false);
  EXPECT_EQ(tok->decode(emoji), "🦙");
}

TEST(tokenizerVocabFiles, EncodesTenKilobytesQuickly) {
  const auto cases = read_cases(vocab_path("llama-spm").string() + ".inp");
  std::string text;
  for (size_t i = 0; text.size() < 10 * 1024; ++i) text += cases[i % cases.size()] + " ";
  for (const std::string name : {"llama-spm", "gpt-2", "deepseek-llm"}) {
    const auto tok = load(name);
    tok->encode(text, true, true);  // warm-up (JIT, allocations)
    const auto t0 = std::chrono::steady_clock::now();
    const auto ids = tok->encode(text, true, true);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    std::cout << "[ perf     ] " << name << ": " << text.size() << " bytes -> " << ids.size() << " tokens in " << ms
              << " ms\n";
#ifdef NDEBUG
    EXPECT_LT(ms, 100.0) << name;
#endif
  }
}

}  // namespace
}  // namespace tessera
