// `tessera inspect` and `tessera gen-model` as a user runs them: outputs, key figures, exit codes, messages.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

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

// gemma4-f32 (README_gemma.md): layers 0, 1, 3 slide over 8 positions (2 KV heads of 32), 2 and 4 are global (1 KV
// head of 64, V = K); 3 reuses layer 1's K/V and 4 layer 2's. At -c 4096 a sliding cache keeps 8 - 1 + 512 = 519
// positions: 2 layers x 519 x 128 values x 2 bytes; the global one 4096 x 128 x 2.
TEST(CliInspect, GemmaLayerTypesAndKvCachePerType) {
  const auto path = test::shared_dir() / "fixtures/models/gemma4-f32.gguf";
  auto r = test::run_command({test::tessera_bin().string(), "inspect", path.string(), "--json", "-c", "4096"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  ASSERT_EQ(j["layers"].size(), 5u);
  EXPECT_EQ(j["layers"][0]["type"], "sliding");
  EXPECT_EQ(j["layers"][0]["window"], 8);
  EXPECT_EQ(j["layers"][2]["type"], "global");
  EXPECT_EQ(j["layers"][2]["has_v"], false);
  EXPECT_EQ(j["layers"][3]["kv_source"], 1);
  EXPECT_EQ(j["layers"][4]["kv_source"], 2);
  EXPECT_EQ(j["memory"]["kv_cache"], 2 * 519 * 128 * 2 + 4096 * 128 * 2);
  ASSERT_EQ(j["memory"]["kv_layer_types"].size(), 2u);
  EXPECT_EQ(j["memory"]["kv_layer_types"][1]["type"], "sliding");
  EXPECT_EQ(j["memory"]["kv_layer_types"][1]["n_cells"], 519);
  EXPECT_EQ(j["memory"]["kv_layer_types"][1]["bytes"], 2 * 519 * 128 * 2);
  EXPECT_EQ(j["memory"]["kv_layer_types"][0]["bytes"], 4096 * 128 * 2);

  r = test::run_command({test::tessera_bin().string(), "inspect", path.string(), "-c", "4096"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("sliding (window 8): head_dim 32, kv heads 2 (layers 0-1, 3)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("global: head_dim 64, kv heads 1, V = K (layers 2, 4)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("3 -> 1, 4 -> 2"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("KV cache per layer type at -c 4096"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("2 layers x 519 positions"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1 layer x 4096 positions"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("reusing K/V, no cache"), std::string::npos) << r.out;

  // The MoE fixture names its MoE layers; a llama file shows no layer types.
  r = test::run_command({test::tessera_bin().string(), "inspect",
                         (test::shared_dir() / "fixtures/models/gemma4moe-q4_k_m.gguf").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("MoE layers (experts beside the dense MLP): 0-3"), std::string::npos) << r.out;
  r = test::run_command(
      {test::tessera_bin().string(), "inspect", (test::shared_dir() / "models/stories260K.gguf").string()});
  EXPECT_EQ(r.out.find("layer types"), std::string::npos);
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

std::filesystem::path fixture(const std::string& name) { return test::shared_dir() / "fixtures/models" / name; }

test::CommandResult inspect(std::vector<std::string> args) {
  args.insert(args.begin(), {test::tessera_bin().string(), "inspect"});
  return test::run_command(args);
}

TEST(CliInspect, SplitSetReportsItsFilesAndTheMergedFilesContent) {
  const auto first = fixture("gemma4moe-q4_k_m-split-00001-of-00003.gguf");
  auto set = inspect_json(first);
  auto single = inspect_json(fixture("gemma4moe-q4_k_m.gguf"));
  ASSERT_TRUE(set.contains("split"));
  EXPECT_EQ(set["split"]["n_files"], 3);
  EXPECT_EQ(set["split"]["files"][2]["file"],
            (test::shared_dir() / "fixtures/models/gemma4moe-q4_k_m-split-00003-of-00003.gguf").string());
  uint64_t total = 0;
  for (int i = 1; i <= 3; ++i) {
    total += std::filesystem::file_size(fixture("gemma4moe-q4_k_m-split-0000" + std::to_string(i) + "-of-00003.gguf"));
  }
  EXPECT_EQ(set["file_size"], total);
  EXPECT_EQ(set["metadata"], single["metadata"]);
  EXPECT_EQ(set["n_tensors"], single["n_tensors"]);
  EXPECT_EQ(set["tensor_types"], single["tensor_types"]);
  ASSERT_EQ(set["tensors"].size(), single["tensors"].size());
  for (size_t i = 0; i < set["tensors"].size(); ++i) {
    for (const char* key : {"name", "type", "shape", "bytes"})
      EXPECT_EQ(set["tensors"][i][key], single["tensors"][i][key]);
  }
  EXPECT_FALSE(single.contains("split"));

  auto text = inspect({first.string()});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("split:      3 files"), std::string::npos) << text.out;

  auto later = inspect({fixture("gemma4moe-q4_k_m-split-00002-of-00003.gguf").string()});
  EXPECT_EQ(later.exit_code, 1);
  EXPECT_NE(later.err.find("open the set by its first file: " + first.string()), std::string::npos) << later.err;
}

TEST(CliInspect, TensorsRegexListsTheMatchingTensors) {
  const auto stories = (test::shared_dir() / "models/stories260K.gguf").string();
  auto r = inspect({stories, "--tensors", "ffn_(down|up)", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = json::parse(r.out);
  EXPECT_EQ(j["n_tensors"], 48);
  EXPECT_EQ(j["n_matched"], 10);
  EXPECT_EQ(j["pattern"], "ffn_(down|up)");
  uint64_t bytes = 0;
  for (const auto& t : j["tensors"]) {
    EXPECT_TRUE(std::regex_search(t["name"].get<std::string>(), std::regex("ffn_(down|up)"))) << t["name"];
    EXPECT_EQ(t["type"], "f32");
    EXPECT_EQ(t["shape"].size(), 2u);
    bytes += t["bytes"].get<uint64_t>();
  }
  EXPECT_EQ(j["matched_bytes"], bytes);
  EXPECT_EQ(bytes, 10u * 172 * 64 * 4);

  auto text = inspect({stories, "--tensors", "^blk\\.4\\.ffn_down"});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("1 of 48 match"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("blk.4.ffn_down.weight"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("172 x 64"), std::string::npos) << text.out;
  EXPECT_EQ(text.out.find("blk.3.ffn_down.weight"), std::string::npos) << text.out;

  auto none = inspect({stories, "--tensors", "no_such_tensor", "--json"});
  ASSERT_EQ(none.exit_code, 0) << none.err;
  EXPECT_EQ(json::parse(none.out)["n_matched"], 0);

  auto bad = inspect({stories, "--tensors", "blk.(", "--json"});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("--tensors: 'blk.(' is not a valid regular expression"), std::string::npos) << bad.err;
  EXPECT_TRUE(bad.out.empty());
}

TEST(CliInspect, TensorsRegexOnASplitSetNamesTheFiles) {
  auto r = inspect(
      {fixture("gemma4moe-q4_k_m-split-00001-of-00003.gguf").string(), "--tensors", "token_embd|output", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = json::parse(r.out);
  EXPECT_EQ(j["split"]["n_files"], 3);
  ASSERT_GT(j["n_matched"].get<int>(), 0);
  for (const auto& t : j["tensors"]) EXPECT_TRUE(t.contains("split_file")) << t;
  auto text = inspect({fixture("gemma4moe-q4_k_m-split-00001-of-00003.gguf").string(), "--tensors", "^blk\\.0\\."});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("split:      3 files"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("file"), std::string::npos) << text.out;
}

TEST(CliGenModel, SplitCountWritesASetThatInspectsLikeTheWholeFile) {
  test::TempDir dir;
  auto whole = test::run_command(
      {test::tessera_bin().string(), "gen-model", "--n-layer", "3", "--type", "q8_0", "-o", (dir / "m.gguf").string()});
  ASSERT_EQ(whole.exit_code, 0) << whole.err;
  auto split = test::run_command({test::tessera_bin().string(), "gen-model", "--n-layer", "3", "--type", "q8_0",
                                  "--split-count", "3", "-o", (dir / "s.gguf").string()});
  ASSERT_EQ(split.exit_code, 0) << split.err;
  EXPECT_FALSE(std::filesystem::exists(dir / "s.gguf"));
  EXPECT_FALSE(std::filesystem::exists(dir / "s.unsplit.tmp"));
  for (int i = 1; i <= 3; ++i) {
    EXPECT_TRUE(std::filesystem::exists(dir / ("s-0000" + std::to_string(i) + "-of-00003.gguf"))) << i;
  }
  auto a = inspect_json(dir / "m.gguf");
  auto b = inspect_json(dir / "s-00001-of-00003.gguf");
  EXPECT_EQ(b["split"]["n_files"], 3);
  EXPECT_EQ(a["metadata"], b["metadata"]);
  EXPECT_EQ(a["totals"], b["totals"]);
  EXPECT_EQ(a["memory"], b["memory"]);
}

}  // namespace
}  // namespace tessera
