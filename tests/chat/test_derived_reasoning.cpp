// Reasoning markers derived from every template of ../shared/fixtures/templates: each template that renders an
// assistant's reasoning gets markers that read its render back (reasoning and answer apart, whole and byte by
// byte), listed here with what they are; Jinja2's own render of case 07 (expected.json) splits the same way; Kimi
// K3's and MiniMax M3's outputs (thinking, answer, call) split into reasoning, content and calls.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "chat/derive_reasoning.h"
#include "chat/derived.h"
#include "chat/stream.h"
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

chat::ParsedOutput streamed(const OutputFormat& f, std::string_view text) {
  chat::OutputStream s(f);
  chat::ParsedOutput acc;
  auto apply = [&](const chat::OutputDelta& d) {
    acc.reasoning += d.reasoning;
    acc.content += d.content;
    for (const auto& c : d.calls) {
      if (c.first) {
        acc.calls.push_back({c.name, ""});
      } else {
        acc.calls[c.index].arguments += c.arguments;
      }
    }
  };
  for (size_t k = 0; k < text.size(); ++k) apply(s.push(text.substr(k, 1)));
  apply(s.finish());
  return acc;
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
    const auto s = streamed(f, d.sample);
    EXPECT_EQ(s.reasoning, p.reasoning);
    EXPECT_EQ(s.content, p.content);
    EXPECT_EQ(d.prompt_opens, want->second.prompt_opens);
    // With thinking off the generation prompt leaves the output outside a block (it writes none, an empty one, or
    // the close alone), unless the template ignores the switch.
    EXPECT_EQ(chat::prompt_opens_reasoning(d.off_prompt, f), want->second.off_opens) << d.off_prompt;
  }
  EXPECT_EQ(rendering, expected().size());
}

}  // namespace
}  // namespace tessera::test
