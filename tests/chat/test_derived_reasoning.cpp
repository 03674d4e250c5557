// Reasoning markers derived from every template of ../shared/fixtures/templates: each template that renders an
// assistant's reasoning gets markers that read its render back (reasoning and answer apart, whole and byte by
// byte), listed here with what they are; Jinja2's own render of case 07 (expected.json) splits the same way; Kimi
// K3's and MiniMax M3's outputs (thinking, answer, call) split into reasoning, content and calls.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "chat/derive_reasoning.h"
#include "chat/derived.h"
#include "chat/stream.h"
#include "chat/streamed_output.h"
#include "support/test_paths.h"

namespace tessera::test {
namespace {

using chat::OutputFormat;
using chat::ReasoningFormat;

struct Template {
  std::string source, bos, eos;
  std::string reasoning_render;  // Jinja2's render of case 07 (reasoning in the history), "" when absent
};

std::string read(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw std::runtime_error("missing " + p.string());
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

const std::map<std::string, Template>& corpus() {
  static const std::map<std::string, Template> all = [] {
    const auto dir = shared_dir() / "fixtures/templates";
    std::map<std::string, Template> out;
    for (const auto& entry : std::filesystem::directory_iterator(dir / "templates")) {
      if (entry.path().extension() == ".jinja") out[entry.path().filename().string()].source = read(entry.path());
    }
    for (const auto& e : nlohmann::json::parse(read(dir / "expected.json"))) {
      auto it = out.find(e["template"]);
      if (it == out.end()) continue;
      it->second.bos = e["variables"].value("bos_token", "");
      it->second.eos = e["variables"].value("eos_token", "");
      if (e["case"] == "07_reasoning_content") it->second.reasoning_render = e.value("output", "");
    }
    return out;
  }();
  return all;
}

// What each template's reasoning derives to: the open and close markers, the answer's introduction, whether the
// generation prompt (thinking on) opens the block, and whether it still does with thinking off (templates that
// ignore the switch). Templates not listed render no reasoning in an assistant turn after the last user message
// (QwQ, DeepSeek R1 / V3.1, Gemma 4 outside tool turns, ...). Think: the markers are <think>'s, kept exact.
struct Expected {
  std::string open, close, answer;
  bool prompt_opens = false, off_opens = false;
  ReasoningFormat format = ReasoningFormat::Derived;
};

const std::map<std::string, Expected>& expected() {
  constexpr auto Think = ReasoningFormat::Think;
  static const std::map<std::string, Expected> all = {
      {"Apriel-1.6-15b-Thinker-fixed.jinja",
       {"Here are my reasoning steps:", "[BEGIN FINAL RESPONSE]", "", true, true}},
      {"Bielik-11B-v3.0-Instruct.jinja", {"<think>", "</think>", "", true, false, Think}},
      {"ByteDance-Seed-OSS.jinja", {"<seed:think>", "</seed:think>", ""}},
      {"Cohere2MoE.jinja", {"<|START_THINKING|>", "<|END_THINKING|>", "<|START_TEXT|>", true, false}},
      {"GLM-4.6.jinja", {"<think>", "</think>", "", false, false, Think}},
      {"Kimi-K3.jinja", {"<|open|>think<|sep|>", "<|close|>think<|sep|>", "<|open|>response<|sep|>", true, false}},
      {"MiniMax-M3.jinja", {"<mm:think>", "</mm:think>", "", true, false}},
      {"Qwen-Qwen3-0.6B.jinja", {"<think>", "</think>", "", false, false, Think}},
      {"Qwen3.5-4B.jinja", {"<think>", "</think>", "", true, false, Think}},
      {"Reka-Edge.jinja", {"<think>", "</think>", "", true, false, Think}},
      {"StepFun3.5-Flash.jinja", {"<think>", "</think>", "", true, true, Think}},
      {"deepseek-ai-DeepSeek-V4-Flash-0731.jinja", {"<think>", "</think>", "", true, false, Think}},
      {"deepseek-ai-DeepSeek-V4.jinja", {"<think>", "</think>", "", true, false, Think}},
      {"muse-glimmer.jinja", {"to=self<|message|>", "<|eom|><|start|>assistant to=user<|message|>", ""}},
      {"openbmb-MiniCPM5-1B.jinja", {"<think>", "</think>", "", true, false, Think}},
      {"poolside-Laguna-S-2.1.jinja", {"<think>", "</think>", "", true, false, Think}},
      {"poolside-Laguna-XS-2.1.jinja", {"<think>", "</think>", "", true, false, Think}},
      {"poolside-Laguna-XS.2.jinja", {"<think>", "</think>", "", true, false, Think}},
  };
  return all;
}

TEST(ChatDerivedReasoning, EveryTemplateThatRendersReasoningReadsItBack) {
  size_t rendering = 0;
  for (const auto& [name, t] : corpus()) {
    SCOPED_TRACE(name);
    const auto d = chat::derive_reasoning(t.source, t.bos, t.eos);
    const auto want = expected().find(name);
    if (!d.markup) {
      EXPECT_FALSE(d.renders) << "renders reasoning but derives no markers";
      EXPECT_EQ(want, expected().end()) << "expected markers";
      continue;
    }
    ++rendering;
    const auto& m = *d.markup;
    if (want == expected().end()) {
      ADD_FAILURE() << "derived open '" << m.open << "' close '" << m.close << "' answer '" << m.answer << "' sample '"
                    << d.sample << "'";
      continue;
    }
    EXPECT_EQ(m.open, want->second.open);
    EXPECT_EQ(m.close, want->second.close);
    EXPECT_EQ(m.answer, want->second.answer);
    OutputFormat f;
    chat::apply_derived_reasoning(f, d);
    EXPECT_EQ(static_cast<int>(f.reasoning), static_cast<int>(want->second.format));
    f.starts_in_reasoning = d.prompt_opens;
    const auto p = chat::parse_output(d.sample, f, true);
    EXPECT_EQ(p.reasoning, chat::kReasoningSentinel) << d.sample;
    EXPECT_EQ(p.content, chat::kAnswerSentinel) << d.sample;
    const auto s = streamed_bytes(f, d.sample);
    EXPECT_EQ(s.reasoning, p.reasoning);
    EXPECT_EQ(s.content, p.content);
    EXPECT_EQ(d.prompt_opens, want->second.prompt_opens);
    // With thinking off the generation prompt leaves the output outside a block (it writes none, an empty one, or
    // the close alone), unless the template ignores the switch.
    EXPECT_EQ(chat::prompt_opens_reasoning(d.off_prompt, f), want->second.off_opens) << d.off_prompt;
  }
  EXPECT_EQ(rendering, expected().size());
}

// Jinja2's render of case 07 (expected.json), where the template keeps the reasoning of that history turn: from
// the opening marker (or the reasoning itself, where only the prompt writes the marker) to the answer, it splits
// into the case's reasoning and answer with the format the server picks.
TEST(ChatDerivedReasoning, JinjaRendersOfReasoningSplit) {
  const std::string reasoning = "The user wants 17 times 3. 17 * 3 = 51.", answer = "17 * 3 = 51.";
  std::set<std::string> split;
  for (const auto& [name, t] : corpus()) {
    const size_t r = t.reasoning_render.find(reasoning);
    if (r == std::string::npos || !expected().contains(name)) continue;
    SCOPED_TRACE(name);
    OutputFormat f = chat::template_output_format(t.source, t.bos, t.eos);
    const size_t a = t.reasoning_render.find(answer, r + reasoning.size());
    ASSERT_NE(a, std::string::npos);
    const std::string open = f.reasoning == ReasoningFormat::Derived ? f.markup.open : "<think>";
    const size_t o = t.reasoning_render.rfind(open, r);
    size_t from = r;
    if (o != std::string::npos && o + open.size() + 2 >= r) {
      from = o;
    } else {
      f.starts_in_reasoning = true;  // the marker is the generation prompt's
    }
    const std::string text = t.reasoning_render.substr(from, a + answer.size() - from);
    const auto p = chat::parse_output(text, f, true);
    EXPECT_EQ(p.reasoning, reasoning) << text;
    EXPECT_EQ(p.content, answer) << text;
    const auto s = streamed_bytes(f, text);
    EXPECT_EQ(s.reasoning, p.reasoning);
    EXPECT_EQ(s.content, p.content);
    split.insert(name);
  }
  EXPECT_TRUE(split.contains("Kimi-K3.jinja"));
  EXPECT_TRUE(split.contains("MiniMax-M3.jinja"));
  EXPECT_GE(split.size(), 5u);
}

// Each prefix's parse is a prefix of the whole parse (what streams rely on), and the stream adds up to it.
void expect_prefixes(const OutputFormat& f, const std::string& text, const chat::ParsedOutput& whole) {
  for (size_t n = 0; n <= text.size(); ++n) {
    const auto p = chat::parse_output(std::string_view(text).substr(0, n), f, false);
    ASSERT_TRUE(whole.reasoning.starts_with(p.reasoning)) << n << ": " << p.reasoning;
    ASSERT_TRUE(whole.content.starts_with(p.content)) << n << ": " << p.content;
    ASSERT_LE(p.calls.size(), whole.calls.size()) << n;
  }
  const auto s = streamed_bytes(f, text);
  EXPECT_EQ(s.reasoning, whole.reasoning);
  EXPECT_EQ(s.content, whole.content);
  ASSERT_EQ(s.calls.size(), whole.calls.size());
  for (size_t k = 0; k < s.calls.size(); ++k) EXPECT_EQ(s.calls[k].arguments, whole.calls[k].arguments);
}

// Kimi K3 by name: its prompt (thinking on, the template's default) opens the block; the model thinks, closes it,
// answers in the response block and calls a tool. (The text ends where the derived call syntax ends: the "<|sep|>"
// after "<|close|>tools" is the turn's end to it, docs/structured-output.md.)
TEST(ChatDerivedReasoning, KimiK3ThinkingAnswerAndCall) {
  const Template& t = corpus().at("Kimi-K3.jinja");
  const auto d = chat::derive_reasoning(t.source, t.bos, t.eos);
  ASSERT_TRUE(d.markup);
  EXPECT_TRUE(d.prompt_opens);
  EXPECT_TRUE(d.off_prompt.ends_with("<|open|>response<|sep|>")) << d.off_prompt;
  OutputFormat f = chat::template_output_format(t.source, t.bos, t.eos);
  ASSERT_EQ(f.reasoning, ReasoningFormat::Derived);
  ASSERT_EQ(f.tools, chat::ToolFamily::Derived);
  EXPECT_TRUE(chat::prompt_opens_reasoning(
      "<|open|>message role=\"user\"<|sep|>Hi<|close|>message<|sep|><|end_of_msg|><|open|>message "
      "role=\"assistant\"<|sep|><|open|>think<|sep|>",
      f));
  f.parse_tools = true;
  f.starts_in_reasoning = true;
  const std::string text =
      "The user wants the weather in Paris.\nI should call get_weather.<|close|>think<|sep|><|open|>response<|sep|>"
      "Let me check.<|close|>response<|sep|><|open|>tools<|sep|><|open|>call tool=\"get_weather\" index=\"1\"<|sep|>"
      "<|open|>argument key=\"city\" type=\"string\"<|sep|>Paris<|close|>argument<|sep|><|open|>argument "
      "key=\"days\" type=\"number\"<|sep|>3<|close|>argument<|sep|><|close|>call<|sep|><|close|>tools";
  const auto p = chat::parse_output(text, f, true);
  EXPECT_EQ(p.reasoning, "The user wants the weather in Paris.\nI should call get_weather.");
  EXPECT_EQ(p.content, "Let me check.");
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].name, "get_weather");
  EXPECT_EQ(nlohmann::json::parse(p.calls[0].arguments), nlohmann::json::parse(R"({"city": "Paris", "days": 3})"));
  expect_prefixes(f, text, p);
  // Thinking still going: all reasoning, a partial close held back.
  EXPECT_EQ(chat::parse_output("Hmm.<|close|>thi", f, false).reasoning, "Hmm.");
  EXPECT_EQ(chat::parse_output("Hmm.<|close|>think<|sep|><|open|>resp", f, false).content, "");
}

// MiniMax M3 by name: with thinking enabled the prompt opens <mm:think>; disabled, it writes the close alone
// ("</mm:think>") and the output is the answer; adaptive (the default) leaves it to the model.
TEST(ChatDerivedReasoning, MiniMaxM3ThinkingAnswerAndCall) {
  const Template& t = corpus().at("MiniMax-M3.jinja");
  const auto d = chat::derive_reasoning(t.source, t.bos, t.eos);
  ASSERT_TRUE(d.markup);
  EXPECT_TRUE(d.prompt_opens);
  EXPECT_TRUE(d.off_closes);
  EXPECT_TRUE(d.off_prompt.ends_with("]~b]ai\n</mm:think>")) << d.off_prompt;
  OutputFormat f = chat::template_output_format(t.source, t.bos, t.eos);
  ASSERT_EQ(f.reasoning, ReasoningFormat::Derived);
  ASSERT_EQ(f.tools, chat::ToolFamily::Derived);
  EXPECT_FALSE(chat::prompt_opens_reasoning(d.off_prompt, f));
  EXPECT_TRUE(chat::prompt_opens_reasoning("]~b]user\nHi[e~[\n]~b]ai\n<mm:think>", f));
  f.parse_tools = true;
  const std::string ns = "]<]minimax[>[";
  const std::string text = "<mm:think>The user wants the weather in Paris.</mm:think>Let me check." + ns +
                           "<tool_call>\n" + ns + "<invoke name=\"get_weather\">" + ns + "<city>Paris" + ns +
                           "</city>" + ns + "<unit>celsius" + ns + "</unit>" + ns + "</invoke>\n" + ns + "</tool_call>";
  const auto p = chat::parse_output(text, f, true);
  EXPECT_EQ(p.reasoning, "The user wants the weather in Paris.");
  EXPECT_EQ(p.content, "Let me check.");
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].name, "get_weather");
  EXPECT_EQ(nlohmann::json::parse(p.calls[0].arguments),
            nlohmann::json::parse(R"({"city": "Paris", "unit": "celsius"})"));
  expect_prefixes(f, text, p);
  // Thinking off: the output after the prompt's "</mm:think>" is the answer.
  f.starts_in_reasoning = chat::prompt_opens_reasoning(d.off_prompt, f);
  const auto off = chat::parse_output("Happy: glad.", f, true);
  EXPECT_EQ(off.reasoning, "");
  EXPECT_EQ(off.content, "Happy: glad.");
}

}  // namespace
}  // namespace tessera::test
