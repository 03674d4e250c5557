// `tessera run`, `tokenize` and `perplexity` as a user runs them: streams, reference outputs, logits files, errors.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>

#include "gguf/gguf_file.h"
#include "gguf/gguf_split.h"
#include "gguf/gguf_writer.h"
#include "support/test_paths.h"

namespace tessera {
namespace {

using nlohmann::json;

using test::tessera;

json stories_reference() {
  std::ifstream in(test::shared_dir() / "models/reference/stories260K.greedy.json");
  return json::parse(in);
}

TEST(CliRun, GreedyFromBosReproducesTheReferenceStory) {
  // -p "" starts from BOS alone; standard output is the (empty) prompt followed by the text, then a newline.
  auto r = tessera({"run", "-p", "", "-n", "200", "--temp", "0"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, stories_reference()["expected_text"].get<std::string>() + "\n");
  EXPECT_NE(r.err.find("generation time"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("tokens per second"), std::string::npos) << r.err;
}

// --pin binds the threads; the text is the same.
TEST(CliRun, PinnedThreadsGiveTheSameText) {
  auto r = tessera({"run", "-p", "", "-n", "200", "--temp", "0", "-t", "2", "--pin"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, stories_reference()["expected_text"].get<std::string>() + "\n");
}

TEST(CliRun, PromptIsEchoedThenContinued) {
  auto r = tessera({"run", "-m", (test::shared_dir() / "models/stories260K.gguf").string(), "-p",
                    "Once upon a time, there was", "-n", "12", "--temp", "0"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string story = stories_reference()["expected_text"];
  // The reference story starts with the same words, so greedy decoding continues it.
  ASSERT_GT(r.out.size(), 30u);
  EXPECT_EQ(r.out.substr(0, 40), story.substr(0, 40));
}

TEST(CliRun, SeededSamplingIsReproducible) {
  auto a = tessera({"run", "-p", "Once", "-n", "30", "--seed", "7", "--temp", "1.0"});
  auto b = tessera({"run", "-p", "Once", "-n", "30", "--seed", "7", "--temp", "1.0"});
  auto c = tessera({"run", "-p", "Once", "-n", "30", "--seed", "8", "--temp", "1.0"});
  ASSERT_EQ(a.exit_code, 0) << a.err;
  EXPECT_EQ(a.out, b.out);
  EXPECT_NE(a.out, c.out);
}

// --repack packs the weights at load; the tiles are the same as the per-call repack, so the text is identical.
TEST(CliRun, RepackGivesTheSameTextAndReportsItsMemory) {
  const std::string model = (test::shared_dir() / "fixtures/models/mixtral-q4_k_m.gguf").string();
  auto plain = tessera({"run", "-m", model, "-p", "a b c d e f g h i j k l m n o p", "-n", "16", "--temp", "0"});
  auto packed =
      tessera({"run", "-m", model, "-p", "a b c d e f g h i j k l m n o p", "-n", "16", "--temp", "0", "--repack"});
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  ASSERT_EQ(packed.exit_code, 0) << packed.err;
  EXPECT_EQ(plain.out, packed.out);
  EXPECT_TRUE(packed.err.find("weights packed for the CPU's matrix kernels") != std::string::npos ||
              packed.err.find("no packed layout") != std::string::npos)
      << packed.err;
  EXPECT_EQ(plain.err.find("packed"), std::string::npos) << plain.err;
}

TEST(CliRun, StopStringEndsTheOutputBeforeIt) {
  auto r = tessera({"run", "-p", "", "-n", "200", "--temp", "0", "--stop", "red ball"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out,
            "Once upon a time, there was a little girl named Lily. She loved to play outside in the park. One "
            "day, she saw a big, \n");
  EXPECT_NE(r.err.find("stopped by:       stop string"), std::string::npos) << r.err;
}

TEST(CliRun, PromptFileAndLogitsOut) {
  test::TempDir dir;
  { std::ofstream(dir / "p.txt") << ""; }
  const auto logits = dir / "logits.bin";
  auto r = tessera({"run", "-f", (dir / "p.txt").string(), "-n", "3", "--temp", "0", "--kv-type", "f32", "--logits-out",
                    logits.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // BOS, then the first two generated tokens are evaluated (the third is sampled, not evaluated).
  const auto bytes = test::read_file(logits);
  ASSERT_EQ(bytes.size(), 3u * 512 * 4);
  const float* row0 = reinterpret_cast<const float*>(bytes.data());
  const auto step0 = stories_reference()["step0_logits"].get<std::vector<float>>();
  for (size_t i = 0; i < step0.size(); ++i) ASSERT_NEAR(row0[i], step0[i], 1e-4) << i;
}

TEST(CliRun, BadInputIsAClearError) {
  auto bad_temp = tessera({"run", "-p", "x", "--top-p", "1.5"});
  EXPECT_EQ(bad_temp.exit_code, 1);
  EXPECT_NE(bad_temp.err.find("top_p must be in (0, 1], got 1.5"), std::string::npos) << bad_temp.err;

  auto too_long = tessera({"run", "-p", "Once upon a time there was a little girl", "-c", "4"});
  EXPECT_EQ(too_long.exit_code, 1);
  EXPECT_NE(too_long.err.find("does not fit the context of 4 tokens"), std::string::npos) << too_long.err;

  auto vocab_only =
      tessera({"run", "-m", (test::shared_dir() / "models/vocab/ggml-vocab-gpt-2.gguf").string(), "-p", "x"});
  EXPECT_EQ(vocab_only.exit_code, 1);
  EXPECT_NE(vocab_only.err.find("unsupported architecture 'gpt2'"), std::string::npos) << vocab_only.err;

  auto missing = tessera({"run", "-m", "/nonexistent/model.gguf", "-p", "x"});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("/nonexistent/model.gguf: cannot open"), std::string::npos) << missing.err;

  auto no_template = tessera({"run", "--chat", "-p", "hi", "-n", "4"});
  EXPECT_EQ(no_template.exit_code, 1);
  EXPECT_NE(no_template.err.find("--chat-template"), std::string::npos) << no_template.err;
  EXPECT_TRUE(bad_temp.out.empty() && too_long.out.empty());
}

TEST(CliRun, UnsupportedTensorTypeNamesTheTensor) {
  // A copy of a fixture model in which one tensor is stored as iq2_xxs, a type Tessera reads but cannot compute.
  test::TempDir dir;
  const auto src = gguf::GgufFile::open(test::shared_dir() / "fixtures/models/llama-f32.gguf");
  gguf::GgufWriter w;
  for (const auto& [key, value] : src.metadata().entries()) w.set(key, value);
  for (const auto& t : src.tensors()) {
    if (t.name == "blk.1.attn_q.weight") {
      w.add_tensor(t.name, GgmlType::IQ2_XXS, t.ne,
                   std::vector<uint8_t>(row_size(GgmlType::IQ2_XXS, t.ne[0]) * t.rows()));
    } else {
      const auto data = src.tensor_data(t);
      w.add_tensor(t.name, t.type, t.ne, std::vector<uint8_t>(data.begin(), data.end()));
    }
  }
  w.write(dir / "iq.gguf");
  auto r = tessera({"run", "-m", (dir / "iq.gguf").string(), "-p", "hello", "-n", "4"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("tensor 'blk.1.attn_q.weight' has type iq2_xxs, which Tessera cannot compute with"),
            std::string::npos)
      << r.err;
  EXPECT_TRUE(r.out.empty());
}

TEST(CliRun, SplitSetGivesTheSameTokensAndLogitsAsTheWholeFile) {
  test::TempDir dir;
  const auto whole_path = test::shared_dir() / "models/stories260K.gguf";
  const auto parts = gguf::write_split(gguf::GgufFile::open(whole_path), dir / "stories260K", 3);
  const auto run = [&](const std::filesystem::path& model, const std::filesystem::path& logits) {
    return tessera({"run", "-m", model.string(), "-p", "Once upon a time", "-n", "24", "--temp", "0", "--kv-type",
                    "f32", "--logits-out", logits.string()});
  };
  const auto whole = run(whole_path, dir / "whole.bin");
  ASSERT_EQ(whole.exit_code, 0) << whole.err;
  const auto split = run(parts.front(), dir / "split.bin");
  ASSERT_EQ(split.exit_code, 0) << split.err;
  EXPECT_EQ(split.out, whole.out);
  const auto a = test::read_file(dir / "whole.bin");
  EXPECT_FALSE(a.empty());
  EXPECT_TRUE(a == test::read_file(dir / "split.bin"));

  // A later file is not a model; the error names the file to use.
  auto later = tessera({"run", "-m", parts[1].string(), "-p", "x", "-n", "2"});
  EXPECT_EQ(later.exit_code, 1);
  EXPECT_NE(later.err.find("open the set by its first file: " + parts[0].string()), std::string::npos) << later.err;
  std::filesystem::remove(parts[2]);
  auto missing = tessera({"run", "-m", parts[0].string(), "-p", "x", "-n", "2"});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("part 3 of 3 is missing: " + parts[2].string()), std::string::npos) << missing.err;
  EXPECT_TRUE(later.out.empty() && missing.out.empty());
}

TEST(CliPerplexity, SplitSetScoresLikeTheWholeFile) {
  test::TempDir dir;
  const auto whole_path = test::shared_dir() / "models/stories260K.gguf";
  const auto parts = gguf::write_split(gguf::GgufFile::open(whole_path), dir / "stories260K", 2);
  { std::ofstream(dir / "t.txt") << stories_reference()["expected_text"].get<std::string>(); }
  const auto ppl = [&](const std::filesystem::path& model) {
    auto r = tessera({"perplexity", "-m", model.string(), "-f", (dir / "t.txt").string(), "-c", "64"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::smatch m;
    EXPECT_TRUE(std::regex_search(r.out, m, std::regex("PPL = ([0-9.]+)"))) << r.out;
    return m.size() > 1 ? m[1].str() : std::string();
  };
  const std::string whole = ppl(whole_path);
  EXPECT_FALSE(whole.empty());
  EXPECT_EQ(ppl(parts.front()), whole);
}

TEST(CliChat, ConversationWithATemplate) {
  test::TempDir dir;
  auto gen = tessera({"gen-model", "--arch", "qwen3", "-o", (dir / "m.gguf").string()});
  ASSERT_EQ(gen.exit_code, 0) << gen.err;
  auto r = tessera({"run", "-m", (dir / "m.gguf").string(), "--chat", "--chat-template", "chatml", "-p", "hello", "-n",
                    "5", "--temp", "0"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("template chatml"), std::string::npos) << r.err;
  EXPECT_FALSE(r.out.empty());
}

// gen-model's Gemma files run: a gemma4 MoE (26B-A4B's layout) at q4_k_m, a gemma4 dense one with other layer
// counts than its preset's (the layout follows), and the refusal of an MoE gemma3.
TEST(CliGenModel, GemmaModelsGenerateAndRun) {
  test::TempDir dir;
  const std::string moe = (dir / "moe.gguf").string();
  auto gen = tessera({"gen-model", "--arch", "gemma4", "--moe", "--type", "q4_k_m", "-o", moe});
  ASSERT_EQ(gen.exit_code, 0) << gen.err;
  auto r = tessera({"run", "-m", moe, "-p", "Once upon a time", "-n", "8", "--temp", "0"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("Once upon a time", 0), 0u) << r.out;
  EXPECT_GT(r.out.size(), std::string("Once upon a time").size() + 1) << r.out;
  EXPECT_NE(r.err.find("tokens per second"), std::string::npos) << r.err;

  const std::string dense = (dir / "dense.gguf").string();
  gen = tessera({"gen-model", "--arch", "gemma4", "--n-layer", "9", "--type", "q8_0", "-o", dense});
  ASSERT_EQ(gen.exit_code, 0) << gen.err;
  r = tessera({"run", "-m", dense, "-p", "Once upon a time", "-n", "8", "--temp", "0"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto file = gguf::GgufFile::open(dense);
  EXPECT_EQ(file.metadata().get_array("gemma4.attention.sliding_window_pattern").size(), 9u);

  auto bad = tessera({"gen-model", "--arch", "gemma3", "--moe", "-o", (dir / "bad.gguf").string()});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("gemma3 has no MoE"), std::string::npos) << bad.err;
  EXPECT_FALSE(std::filesystem::exists(dir / "bad.gguf"));
}

TEST(CliTokenize, IdsAndPieces) {
  auto ids = tessera({"tokenize", "-p", "Once upon a time there was a little girl named Lily", "--ids"});
  ASSERT_EQ(ids.exit_code, 0) << ids.err;
  EXPECT_EQ(ids.out, "[1, 403, 407, 261, 378, 383, 286, 261, 376, 298, 315, 421, 395, 317]\n");
  auto no_bos = tessera({"tokenize", "-p", "Once", "--ids", "--no-bos"});
  EXPECT_EQ(no_bos.out, "[403]\n");
  auto pieces = tessera({"tokenize", "-p", "Once upon"});
  EXPECT_NE(pieces.out.find("403 -> ' Once'"), std::string::npos) << pieces.out;
  auto bpe = tessera({"tokenize", "-m", (test::shared_dir() / "models/vocab/ggml-vocab-gpt-2.gguf").string(), "-p",
                      "Hello world", "--ids"});
  ASSERT_EQ(bpe.exit_code, 0) << bpe.err;
  EXPECT_EQ(bpe.out, "[15496, 995]\n");
}

TEST(CliPerplexity, LowOnTheModelsOwnStoryHighOnNoise) {
  test::TempDir dir;
  const std::string story = stories_reference()["expected_text"];
  { std::ofstream(dir / "story.txt") << story << "\n" << story; }
  auto r = tessera({"perplexity", "-f", (dir / "story.txt").string(), "-c", "128"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::smatch m;
  const std::regex re("PPL = ([0-9.]+)");
  ASSERT_TRUE(std::regex_search(r.out, m, re)) << r.out;
  const double ppl = std::stod(m[1]);
  EXPECT_GT(ppl, 1.0);
  EXPECT_LT(ppl, 3.0);  // greedy text of this very model

  std::string noise;
  for (size_t i = 0; i < story.size(); ++i) noise += static_cast<char>('a' + (i * 7919) % 26);
  { std::ofstream(dir / "noise.txt") << noise; }
  auto n = tessera({"perplexity", "-f", (dir / "noise.txt").string(), "-c", "128"});
  ASSERT_EQ(n.exit_code, 0) << n.err;
  ASSERT_TRUE(std::regex_search(n.out, m, re)) << n.out;
  EXPECT_GT(std::stod(m[1]), 10 * ppl);
  // The figure is on the last line.
  EXPECT_EQ(n.out.find('\n'), n.out.size() - 1);

  auto short_text = tessera({"perplexity", "-f", (dir / "story.txt").string(), "-c", "4096"});
  EXPECT_EQ(short_text.exit_code, 1);
  EXPECT_NE(short_text.err.find("too short for a context of 4096"), std::string::npos) << short_text.err;
}

}  // namespace
}  // namespace tessera
