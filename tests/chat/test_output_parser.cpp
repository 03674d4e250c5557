// parse_output on recorded outputs of every family (the final parse), what partial parses hold back, and the
// family detection on the real templates of ../shared/fixtures/templates.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "chat/output.h"
#include "chat/recorded_outputs.h"
#include "support/test_paths.h"

namespace tessera::test {
namespace {

using chat::OutputFormat;
using chat::parse_output;
using chat::ReasoningFormat;
using chat::ToolFamily;

TEST(ChatOutput, RecordedOutputsParse) {
  for (const auto& r : recorded_outputs()) {
    SCOPED_TRACE(r.label);
    const auto p = parse_output(r.text, r.format, true);
    EXPECT_EQ(p.reasoning, r.reasoning);
    EXPECT_EQ(p.content, r.content);
    ASSERT_EQ(p.calls.size(), r.calls.size());
    for (size_t i = 0; i < r.calls.size(); ++i) {
      EXPECT_EQ(p.calls[i].name, r.calls[i].name);
      EXPECT_EQ(p.calls[i].arguments, r.calls[i].arguments);
      EXPECT_TRUE(nlohmann::json::parse(p.calls[i].arguments).is_object());
    }
  }
}

TEST(ChatOutput, PartialParseHoldsBackWhatMayBeAMarker) {
  const OutputFormat f{ToolFamily::Hermes, ReasoningFormat::None, true, false, {}, {}, {}};
  EXPECT_EQ(parse_output("Sure <tool_c", f, false).content, "Sure");
  EXPECT_EQ(parse_output("Sure <tool_c", f, true).content, "Sure <tool_c");
  EXPECT_EQ(parse_output("Sure <b>", f, false).content, "Sure <b>");
  // Inside a call nothing is content; the arguments grow.
  const auto p = parse_output("<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": [1, 2", f, false);
  EXPECT_EQ(p.content, "");
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].name, "f");
  EXPECT_EQ(p.calls[0].arguments, "{\"a\": [1, 2");
  // A call cut off by the token limit is text in the final parse: nothing is lost.
  const auto cut = parse_output("<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": [1, 2", f, true);
  EXPECT_TRUE(cut.calls.empty());
  EXPECT_EQ(cut.content, "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": [1, 2");
}

TEST(ChatOutput, ReasoningStillOpenIsReasoning) {
  const OutputFormat f{ToolFamily::Hermes, ReasoningFormat::Think, false, false, {}, {}, {}};
  EXPECT_EQ(parse_output("<think>\nstep one\n</thi", f, false).reasoning, "step one");
  EXPECT_EQ(parse_output("<think>\nstep one\n</thi", f, false).content, "");
  EXPECT_EQ(parse_output("<thi", f, false).content, "");
  EXPECT_EQ(parse_output("<thi", f, true).content, "<thi");
  EXPECT_EQ(parse_output("<think>all of it", f, true).reasoning, "all of it");
}

TEST(ChatOutput, ToolsNotOfferedLeaveCallsAsText) {
  const OutputFormat f{ToolFamily::Hermes, ReasoningFormat::None, false, false, {}, {}, {}};
  const std::string text = "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>";
  const auto p = parse_output(text, f, true);
  EXPECT_TRUE(p.calls.empty());
  EXPECT_EQ(p.content, text);
}

TEST(ChatOutput, PromptOpensReasoning) {
  EXPECT_TRUE(chat::prompt_opens_reasoning("<｜Assistant｜><think>\n", ReasoningFormat::Think));
  EXPECT_FALSE(chat::prompt_opens_reasoning("<|im_start|>assistant\n<think>\n\n</think>\n\n", ReasoningFormat::Think));
  EXPECT_FALSE(chat::prompt_opens_reasoning("<|im_start|>assistant\n", ReasoningFormat::Think));
  EXPECT_FALSE(chat::prompt_opens_reasoning("<think>\n", ReasoningFormat::None));
}

std::string read_template(const std::string& name) {
  std::ifstream in(shared_dir() / "fixtures/templates/templates" / name, std::ios::binary);
  if (!in) throw std::runtime_error("missing template " + name);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST(ChatOutput, FamiliesDetectedFromRealTemplates) {
  const std::vector<std::tuple<std::string, ToolFamily, ReasoningFormat>> cases = {
      {"Qwen-Qwen3-0.6B.jinja", ToolFamily::Hermes, ReasoningFormat::Think},
      {"Qwen-Qwen2.5-7B-Instruct.jinja", ToolFamily::Hermes, ReasoningFormat::None},
      {"NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja", ToolFamily::Hermes, ReasoningFormat::None},
      {"meta-llama-Llama-3.1-8B-Instruct.jinja", ToolFamily::Llama3, ReasoningFormat::None},
      {"mistralai-Mistral-Nemo-Instruct-2407.jinja", ToolFamily::Mistral, ReasoningFormat::None},
      {"Mistral-Small-3.2-24B-Instruct-2506.jinja", ToolFamily::Mistral, ReasoningFormat::None},
      {"deepseek-ai-DeepSeek-V3.1.jinja", ToolFamily::DeepSeek, ReasoningFormat::Think},
      {"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", ToolFamily::DeepSeek, ReasoningFormat::Think},
      {"google-gemma-4-31B-it-interleaved.jinja", ToolFamily::Gemma4, ReasoningFormat::GemmaChannel},
  };
  for (const auto& [name, family, reasoning] : cases) {
    SCOPED_TRACE(name);
    const auto f = chat::detect_output_format(read_template(name));
    EXPECT_EQ(chat::tool_family_name(f.tools), chat::tool_family_name(family));
    EXPECT_EQ(static_cast<int>(f.reasoning), static_cast<int>(reasoning));
  }
  // gpt-oss's template is not in the corpus: its markers.
  EXPECT_EQ(chat::detect_output_format("<|start|>assistant<|channel|>final<|message|>").tools, ToolFamily::Harmony);
}

// The assistant turn each real template writes for case 06_tool_call (expected.json: Jinja2's rendering), cut out
// of the prompt between the template's own delimiters, read back with the family the template's text selects:
// one call of get_weather with the case's arguments.
TEST(ChatOutput, AssistantTurnsOfRealTemplatesParseBack) {
  std::ifstream in(shared_dir() / "fixtures/templates/expected.json", std::ios::binary);
  ASSERT_TRUE(in) << "missing expected.json";
  const auto expected = nlohmann::json::parse(in);
  struct Turn {
    std::string tmpl, start, end;
  };
  const std::vector<Turn> turns = {
      {"Qwen-Qwen3-0.6B.jinja", "<|im_start|>assistant\n", "<|im_end|>"},
      {"Qwen-Qwen2.5-7B-Instruct.jinja", "<|im_start|>assistant\n", "<|im_end|>"},
      {"Qwen3.5-4B.jinja", "<|im_start|>assistant\n", "<|im_end|>"},
      {"NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja", "<|im_start|>assistant\n", "<|im_end|>"},
      {"ibm-granite-granite-4.1.jinja", "assistant<|end_of_role|>", "<|end_of_text|>"},
      {"GLM-4.6.jinja", "<|assistant|>", "<|observation|>"},
      {"meta-llama-Llama-3.1-8B-Instruct.jinja", "assistant<|end_header_id|>\n\n", "<|eot_id|>"},
      {"mistralai-Mistral-Nemo-Instruct-2407.jinja", "[/INST]", "</s>"},
      {"Mistral-Small-3.2-24B-Instruct-2506.jinja", "[/INST]", "</s>"},
      {"unsloth-mistral-Devstral-Small-2507.jinja", "[/INST]", "</s>"},
      {"deepseek-ai-DeepSeek-V3.1.jinja", "<｜Assistant｜>", "<｜end▁of▁sentence｜>"},
      {"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", "<｜Assistant｜>", "<｜end▁of▁sentence｜>"},
      {"google-gemma-4-31B-it-interleaved.jinja", "<|turn>model\n", "<turn|>"},
  };
  const auto want = nlohmann::json::parse(R"({"city": "Paris", "unit": "celsius"})");
  for (const auto& t : turns) {
    SCOPED_TRACE(t.tmpl);
    std::string output;
    for (const auto& e : expected) {
      if (e["template"] == t.tmpl && e["case"] == "06_tool_call") output = e.value("output", "");
    }
    ASSERT_FALSE(output.empty());
    const size_t question = output.find("What's the weather like in Paris today?");
    const size_t start = output.find(t.start, question);
    ASSERT_NE(start, std::string::npos);
    const size_t end = output.find(t.end, start + t.start.size());
    ASSERT_NE(end, std::string::npos);
    const std::string turn = output.substr(start + t.start.size(), end - start - t.start.size());
    OutputFormat f = chat::detect_output_format(read_template(t.tmpl));
    f.parse_tools = true;
    const auto p = parse_output(turn, f, true);
    ASSERT_EQ(p.calls.size(), 1u) << turn;
    EXPECT_EQ(p.calls[0].name, "get_weather");
    EXPECT_EQ(nlohmann::json::parse(p.calls[0].arguments), want) << p.calls[0].arguments;
    EXPECT_EQ(p.content, "") << turn;
    EXPECT_EQ(p.reasoning, "") << turn;
  }
}

}  // namespace
}  // namespace tessera::test
