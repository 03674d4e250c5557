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
  const OutputFormat f{ToolFamily::Hermes, ReasoningFormat::None, true, false};
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
  const OutputFormat f{ToolFamily::Hermes, ReasoningFormat::Think, false, false};
  EXPECT_EQ(parse_output("<think>\nstep one\n</thi", f, false).reasoning, "step one");
  EXPECT_EQ(parse_output("<think>\nstep one\n</thi", f, false).content, "");
  EXPECT_EQ(parse_output("<thi", f, false).content, "");
  EXPECT_EQ(parse_output("<thi", f, true).content, "<thi");
  EXPECT_EQ(parse_output("<think>all of it", f, true).reasoning, "all of it");
}

TEST(ChatOutput, ToolsNotOfferedLeaveCallsAsText) {
  const OutputFormat f{ToolFamily::Hermes, ReasoningFormat::None, false, false};
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

}  // namespace
}  // namespace tessera::test
