// Tool calls read back from every template of ../shared/fixtures/templates that writes them: the assistant turn of
// case 06_tool_call (Jinja2's render in expected.json) parses into exactly the call, whole and streamed byte by
// byte, with the format the server picks for the template (an exact family, or the syntax derived from it).
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "chat/derived.h"
#include "chat/stream.h"
#include "chat/streamed_output.h"
#include "support/test_paths.h"

namespace tessera::test {
namespace {

using chat::OutputFormat;
using chat::ToolFamily;

struct Entry {
  std::string source, bos, eos, output;
};

const std::map<std::string, Entry>& corpus() {
  static const std::map<std::string, Entry> all = [] {
    std::ifstream in(shared_dir() / "fixtures/templates/expected.json", std::ios::binary);
    if (!in) throw std::runtime_error("missing expected.json");
    std::map<std::string, Entry> out;
    for (const auto& e : nlohmann::json::parse(in)) {
      if (e["case"] != "06_tool_call") continue;
      const std::string name = e["template"];
      std::ifstream t(shared_dir() / "fixtures/templates/templates" / name, std::ios::binary);
      Entry x{std::string(std::istreambuf_iterator<char>(t), {}), e["variables"]["bos_token"],
              e["variables"]["eos_token"], e.value("output", "")};
      out.emplace(name, std::move(x));
    }
    return out;
  }();
  return all;
}

// Where the model's output starts and ends in the render (the generation prompt's end, the turn's end). `keep`:
// the end marker is the call syntax's own closing text, which the model writes.
struct Turn {
  std::string tmpl, start, end;
  bool keep = false;
};

const std::vector<Turn>& turns() {
  static const std::vector<Turn> all = {
      {"Apertus-8B-Instruct.jinja", "<|assistant_start|>", "<|tools_suffix|>", true},
      {"Apriel-1.6-15b-Thinker-fixed.jinja", "<|begin_assistant|>\n", "\n<|end|>"},
      {"Bielik-11B-v3.0-Instruct.jinja", "<|im_start|>assistant\n", "<|im_end|>"},
      {"ByteDance-Seed-OSS.jinja", "<seed:bos>assistant\n", "<seed:eos>"},
      {"Cohere2MoE.jinja", "<|CHATBOT_TOKEN|>", "<|END_OF_TURN_TOKEN|>"},
      {"CohereForAI-c4ai-command-r-plus-tool_use.jinja", "<|CHATBOT_TOKEN|>", "<|START_OF_TURN_TOKEN|>"},
      {"GLM-4.6.jinja", "<|assistant|>", "<|observation|>"},
      {"GigaChat3-10B-A1.8B.jinja", "assistant<|role_sep|>\n", "<|message_sep|>\n\nfunction result"},
      {"GigaChat3.1-10B-A1.8B.jinja", "assistant<|role_sep|>\n", "<|message_sep|>\n\nfunction result"},
      // Kimi K3 and MiniMax M3 think in markup no reader knows: the turn is taken after the thinking (and K3's
      // "<|sep|>" after "<|close|>tools" reads as the turn's end, which it shares with a plain answer).
      {"Kimi-K3.jinja", "<|open|>response<|sep|>", "<|sep|><|close|>message<|sep|>"},
      {"MiMo-VL.jinja", "<|im_start|>assistant\n", "<|im_end|>"},
      {"MiniMax-M1.jinja", "ai name=assistant\n", "<end_of_sentence>"},
      {"MiniMax-M3.jinja", "</mm:think>", "[e~["},
      {"Mistral-Small-3.2-24B-Instruct-2506.jinja", "[/INST]", "</s>"},
      {"NVIDIA-Nemotron-Nano-v2.jinja", "<SPECIAL_11>Assistant\n", "<SPECIAL_12>"},
      {"NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja", "<|im_start|>assistant\n", "<|im_end|>"},
      {"NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja", "<|im_start|>assistant\n", "<|im_end|>"},
      {"Qwen-QwQ-32B.jinja", "<|im_start|>assistant\n", "<|im_end|>"},
      {"Qwen-Qwen2.5-7B-Instruct.jinja", "<|im_start|>assistant\n", "<|im_end|>"},
      {"Qwen-Qwen3-0.6B.jinja", "<|im_start|>assistant\n", "<|im_end|>"},
      {"Qwen3.5-4B.jinja", "<|im_start|>assistant\n", "<|im_end|>"},
      {"Reka-Edge.jinja", "<sep>assistant: ", "\n\n<sep>"},
      {"StepFun3.5-Flash.jinja", "<|im_start|>assistant\n", "<|im_end|>"},
      {"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", "<｜Assistant｜>", "<｜end▁of▁sentence｜>"},
      {"deepseek-ai-DeepSeek-V3.1.jinja", "<｜Assistant｜>", "<｜end▁of▁sentence｜>"},
      // V4's generation prompt closes the (empty) reasoning itself: "<｜Assistant｜></think>".
      {"deepseek-ai-DeepSeek-V4.jinja", "<｜Assistant｜></think>", "<｜end▁of▁sentence｜>"},
      {"deepseek-ai-DeepSeek-V4-Flash-0731.jinja", "<｜Assistant｜></think>", "<｜end▁of▁sentence｜>"},
      {"google-gemma-4-31B-it-interleaved.jinja", "<|turn>model\n", "<turn|>"},
      {"ibm-granite-granite-4.1.jinja", "assistant<|end_of_role|>", "<|end_of_text|>"},
      {"meetkai-functionary-medium-v3.1.jinja", "assistant<|end_header_id|>\n\n", "<|eom_id|>", true},
      {"meta-llama-Llama-3.1-8B-Instruct.jinja", "assistant<|end_header_id|>\n\n", "<|eot_id|>"},
      {"meta-llama-Llama-3.3-70B-Instruct.jinja", "assistant<|end_header_id|>\n\n", "<|eot_id|>"},
      {"mistralai-Mistral-Nemo-Instruct-2407.jinja", "[/INST]", "</s>"},
      {"moonshotai-Kimi-K2.jinja", "assistant<|im_middle|>", "<|im_end|>"},
      {"muse-glimmer.jinja", "<|start|>assistant", "<|eot|>"},
      {"openbmb-MiniCPM5-1B.jinja", "<|im_start|>assistant\n", "<|im_end|>"},
      {"poolside-Laguna-S-2.1.jinja", "<assistant>", "</assistant>"},
      {"poolside-Laguna-XS-2.1.jinja", "<assistant>\n</think>", "</assistant>"},
      {"poolside-Laguna-XS.2.jinja", "<assistant>\n</think>", "</assistant>"},
      {"unsloth-Apriel-1.5.jinja", "<|assistant|>\n", "\n<|end|>"},
      {"unsloth-mistral-Devstral-Small-2507.jinja", "[/INST]", "</s>"},
  };
  return all;
}

std::string cut_turn(const Turn& t, const std::string& output) {
  const size_t question = output.find("What's the weather like in Paris today?");
  const size_t start = output.find(t.start, question);
  if (start == std::string::npos) return {};
  const size_t from = start + t.start.size();
  const size_t end = output.find(t.end, from);
  if (end == std::string::npos) return {};
  return output.substr(from, end + (t.keep ? t.end.size() : 0) - from);
}

// Every template whose case 06 writes a call is in the table, and only those.
TEST(ChatDerived, TheTableHoldsEveryTemplateThatWritesCalls) {
  std::set<std::string> listed;
  for (const auto& t : turns()) listed.insert(t.tmpl);
  size_t writing = 0;
  for (const auto& [name, e] : corpus()) {
    SCOPED_TRACE(name);
    const auto d = chat::derive_tool_syntax(e.source, e.bos, e.eos);
    EXPECT_EQ(!d.sample.empty(), listed.contains(name)) << d.sample;
    writing += !d.sample.empty();
  }
  EXPECT_EQ(writing, listed.size());
}

TEST(ChatDerived, EveryTemplatesCallReadsBack) {
  const auto want = nlohmann::json::parse(R"({"city": "Paris", "unit": "celsius"})");
  for (const auto& t : turns()) {
    SCOPED_TRACE(t.tmpl);
    const Entry& e = corpus().at(t.tmpl);
    const std::string turn = cut_turn(t, e.output);
    EXPECT_FALSE(turn.empty());
    OutputFormat f = chat::template_output_format(e.source, e.bos, e.eos);
    f.parse_tools = true;
    SCOPED_TRACE(chat::tool_family_name(f.tools));
    const auto p = chat::parse_output(turn, f, true);
    if (p.calls.size() != 1u) {
      ADD_FAILURE() << p.calls.size() << " calls in " << turn;
      continue;
    }
    EXPECT_EQ(p.calls[0].name, "get_weather");
    EXPECT_EQ(nlohmann::json::parse(p.calls[0].arguments), want) << p.calls[0].arguments;
    EXPECT_EQ(p.content, "") << turn;
    EXPECT_EQ(p.reasoning, "") << turn;
    const auto s = streamed_bytes(f, turn);
    EXPECT_EQ(s.content, p.content);
    EXPECT_EQ(s.reasoning, p.reasoning);
    EXPECT_EQ(s.calls.size(), p.calls.size());
    if (s.calls.size() != 1u) continue;
    EXPECT_EQ(s.calls[0].name, p.calls[0].name);
    EXPECT_EQ(s.calls[0].arguments, p.calls[0].arguments);
  }
}

// The exact families stay where their readers read the template's calls; the rest is derived.
TEST(ChatDerived, ExactFamiliesAreKept) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"Qwen-Qwen3-0.6B.jinja", "hermes"},
      {"Qwen3.5-4B.jinja", "hermes"},
      {"GLM-4.6.jinja", "hermes"},
      {"meta-llama-Llama-3.1-8B-Instruct.jinja", "llama3"},
      {"mistralai-Mistral-Nemo-Instruct-2407.jinja", "mistral"},
      {"deepseek-ai-DeepSeek-V3.1.jinja", "deepseek"},
      {"google-gemma-4-31B-it-interleaved.jinja", "gemma4"},
      {"moonshotai-Kimi-K2.jinja", "derived"},
      {"MiniMax-M3.jinja", "derived"},
      {"deepseek-ai-DeepSeek-V4.jinja", "derived"},
      {"ByteDance-Seed-OSS.jinja", "derived"},
  };
  for (const auto& [name, family] : cases) {
    const Entry& e = corpus().at(name);
    EXPECT_EQ(chat::tool_family_name(chat::template_output_format(e.source, e.bos, e.eos).tools), family) << name;
  }
}

// Text that only looks like the start of a derived block stays content; a stream holds back a partial marker.
TEST(ChatDerived, NotACallStaysContent) {
  const Entry& e = corpus().at("moonshotai-Kimi-K2.jinja");
  OutputFormat f = chat::template_output_format(e.source, e.bos, e.eos);
  ASSERT_EQ(f.tools, ToolFamily::Derived);
  f.parse_tools = true;
  const std::string bad = "Hi <|tool_calls_section_begin|> no call here";
  EXPECT_EQ(chat::parse_output(bad, f, true).content, bad);
  EXPECT_TRUE(chat::parse_output(bad, f, true).calls.empty());
  EXPECT_EQ(chat::parse_output("Hi <|tool_calls_sec", f, false).content, "Hi");
  // Two calls, the second still arriving: the first is whole, the second's arguments grow.
  const std::string two =
      "<|tool_calls_section_begin|><|tool_call_begin|>functions.a:0<|tool_call_argument_begin|>{\"x\": 1}"
      "<|tool_call_end|><|tool_call_begin|>functions.b:1<|tool_call_argument_begin|>{\"y\": [2";
  const auto p = chat::parse_output(two, f, false);
  ASSERT_EQ(p.calls.size(), 2u);
  EXPECT_EQ(p.calls[1].name, "b");
  EXPECT_EQ(p.calls[1].arguments, "{\"y\": [2");
  const auto whole = chat::parse_output(two + "]}<|tool_call_end|><|tool_calls_section_end|>", f, true);
  ASSERT_EQ(whole.calls.size(), 2u);
  EXPECT_EQ(whole.calls[1].arguments, "{\"y\": [2]}");
}

// Pair arguments: types where the template marks them (DeepSeek V4's string="false"), text otherwise.
TEST(ChatDerived, PairArgumentsKeepTheirTypes) {
  const Entry& e = corpus().at("deepseek-ai-DeepSeek-V4.jinja");
  OutputFormat f = chat::template_output_format(e.source, e.bos, e.eos);
  ASSERT_EQ(f.tools, ToolFamily::Derived);
  f.parse_tools = true;
  const std::string text =
      "<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n<｜DSML｜parameter name=\"n\" string=\"false\">42"
      "</｜DSML｜parameter>\n<｜DSML｜parameter name=\"s\" string=\"true\">42</｜DSML｜parameter>\n</｜DSML｜invoke>\n"
      "</｜DSML｜tool_calls>";
  const auto p = chat::parse_output(text, f, true);
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(nlohmann::json::parse(p.calls[0].arguments), nlohmann::json::parse(R"({"n": 42, "s": "42"})"));
}

}  // namespace
}  // namespace tessera::test
