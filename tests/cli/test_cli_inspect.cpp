// `tessera inspect` and `tessera gen-model` as a user runs them: outputs, key figures, exit codes, messages.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "support/test_paths.h"

namespace tessera {
namespace {

using nlohmann::json;

json inspect_json(const std::filesystem::path& file) {
  auto r = test::run_command({test::tessera_bin().string(), "inspect", file.string(), "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return json::parse(r.out);
}

TEST(CliInspect, Stories260KKeyFigures) {
  auto j = inspect_json(test::shared_dir() / "models/stories260K.gguf");
  EXPECT_EQ(j["gguf_version"], 3);
  EXPECT_EQ(j["n_metadata"], 19);
  EXPECT_EQ(j["n_tensors"], 48);
  EXPECT_EQ(j["data_offset"], 14176);
  EXPECT_EQ(j["model"]["architecture"], "llama");
  EXPECT_EQ(j["model"]["n_layer"], 5);
  EXPECT_EQ(j["model"]["n_embd"], 64);
  EXPECT_EQ(j["model"]["n_vocab"], 512);
  EXPECT_EQ(j["model"]["n_head"], 8);
  EXPECT_EQ(j["model"]["n_head_kv"], 4);
  EXPECT_EQ(j["model"]["n_ff"], 172);
  EXPECT_EQ(j["tokenizer"]["model"], "llama");
  EXPECT_EQ(j["tokenizer"]["n_tokens"], 512);
  EXPECT_EQ(j["tokenizer"]["bos"]["id"], 1);
  EXPECT_EQ(j["tokenizer"]["bos"]["text"], "<s>");
  EXPECT_EQ(j["tokenizer"]["eos"]["text"], "</s>");
  EXPECT_EQ(j["tensor_types"]["f32"]["count"], 48);
  EXPECT_EQ(j["totals"]["weight_bytes"], 1171200);
  EXPECT_EQ(j["bytes_per_layer"].size(), 5u);
  EXPECT_EQ(j["memory"]["n_ctx"], 2048);
  EXPECT_EQ(j["memory"]["kv_cache"], 5 * 64 * 2 * 2048);
  EXPECT_EQ(j["metadata"]["tokenizer.ggml.seperator_token_id"], 4294967295u);
  EXPECT_EQ(j["metadata"]["tokenizer.ggml.tokens"]["length"], 512);
  bool found = false;
  for (const auto& t : j["tensors"]) {
    if (t["name"] == "blk.4.ffn_down.weight") {
      found = true;
      EXPECT_EQ(t["type"], "f32");
      EXPECT_EQ(t["shape"], json::array({172, 64}));
      EXPECT_EQ(t["bytes"], 172 * 64 * 4);
    }
  }
  EXPECT_TRUE(found);
}

TEST(CliInspect, TinyRandomF16) {
  auto j = inspect_json(test::shared_dir() / "models/llama-2-tiny-random.gguf");
  EXPECT_EQ(j["data_offset"], 724416);
  EXPECT_EQ(j["model"]["n_embd"], 8);
  EXPECT_EQ(j["model"]["n_layer"], 1);
  EXPECT_EQ(j["model"]["n_vocab"], 32000);
  EXPECT_EQ(j["tensor_types"]["f16"]["count"], 9);
  EXPECT_EQ(j["tensor_types"]["f32"]["count"], 3);
  EXPECT_EQ(j["tokenizer"]["n_tokens"], 32000);
}

TEST(CliInspect, EveryVocabFile) {
  for (const auto& entry : std::filesystem::directory_iterator(test::shared_dir() / "models/vocab")) {
    if (entry.path().extension() != ".gguf") continue;
    auto j = inspect_json(entry.path());
    EXPECT_EQ(j["n_tensors"], 0) << entry.path();
    EXPECT_TRUE(j["model"].is_null()) << entry.path();
    EXPECT_GT(j["tokenizer"]["n_tokens"].get<int>(), 1000) << entry.path();
  }
}

TEST(CliInspect, FixtureModels) {
  for (const char* name : {"llama-q8_0", "qwen2-f32", "qwen3-q8_0", "qwen3moe-q4_k_m", "mixtral-q4_k_m"}) {
    auto j = inspect_json(test::shared_dir() / "fixtures/models" / (std::string(name) + ".gguf"));
    EXPECT_EQ(j["model"]["n_embd"], 256) << name;
    EXPECT_EQ(j["model"]["n_layer"], 2) << name;
    EXPECT_EQ(j["model"]["n_vocab"], 512) << name;
  }
  auto moe = inspect_json(test::shared_dir() / "fixtures/models/qwen3moe-q4_k_m.gguf");
  EXPECT_EQ(moe["model"]["n_expert"], 8);
  EXPECT_EQ(moe["model"]["n_expert_used"], 2);
  EXPECT_EQ(moe["tensor_types"]["q4_K"]["count"], 7);
  EXPECT_EQ(moe["tensor_types"]["q5_0"]["count"], 1);
}

TEST(CliInspect, TextOutput) {
  auto r = test::run_command(
      {test::tessera_bin().string(), "inspect", (test::source_dir() / "models/stories260K.gguf").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("layers 5, n_embd 64, n_ff 172, vocab 512"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("blk.0.attn_q.weight"), std::string::npos);
  EXPECT_NE(r.out.find("memory:"), std::string::npos);
}

TEST(CliInspect, BadInputGivesClearErrors) {
  test::TempDir dir;
  auto missing = test::run_command({test::tessera_bin().string(), "inspect", (dir / "nope.gguf").string()});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("nope.gguf: cannot open"), std::string::npos) << missing.err;

  test::write_file(dir / "bad.gguf", {'G', 'G', 'U', 'X', 3, 0, 0, 0});
  auto bad = test::run_command({test::tessera_bin().string(), "inspect", (dir / "bad.gguf").string()});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("bad.gguf"), std::string::npos) << bad.err;
  EXPECT_NE(bad.err.find("magic"), std::string::npos) << bad.err;
  EXPECT_TRUE(bad.out.empty());

  auto usage = test::run_command({test::tessera_bin().string(), "inspect"});
  EXPECT_EQ(usage.exit_code, 106);  // CLI11's code for a missing required argument
  auto unknown = test::run_command({test::tessera_bin().string(), "frobnicate"});
  EXPECT_NE(unknown.exit_code, 0);
}

TEST(CliGenModel, WritesAndInspects) {
  test::TempDir dir;
  const auto out = dir / "m.gguf";
  auto r = test::run_command({test::tessera_bin().string(), "gen-model", "--arch", "qwen3moe", "--preset", "tiny",
                              "--type", "q4_k_m", "--n-layer", "3", "-o", out.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = inspect_json(out);
  EXPECT_EQ(j["model"]["architecture"], "qwen3moe");
  EXPECT_EQ(j["model"]["n_layer"], 3);
  EXPECT_EQ(j["model"]["n_expert"], 8);
  EXPECT_EQ(j["metadata"]["general.file_type"], 15);
  EXPECT_GT(j["tensor_types"]["q4_K"]["count"].get<int>(), 0);
  EXPECT_GT(j["tensor_types"]["q6_K"]["count"].get<int>(), 0);

  auto bad = test::run_command({test::tessera_bin().string(), "gen-model", "--type", "q9_9", "-o", out.string()});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("unknown weight type 'q9_9' (valid: f32, f16"), std::string::npos) << bad.err;
  auto heads = test::run_command(
      {test::tessera_bin().string(), "gen-model", "--n-head", "6", "--n-head-kv", "4", "-o", out.string()});
  EXPECT_EQ(heads.exit_code, 1);
  EXPECT_NE(heads.err.find("not a multiple of n_head_kv 4"), std::string::npos) << heads.err;
}

}  // namespace
}  // namespace tessera
