// Model outputs shaped exactly as each family's chat template writes an assistant turn with tool calls
// (../shared/fixtures/templates, case 06_tool_call) or reasoning, with the parse each must give.
#pragma once

#include <string>
#include <vector>

#include "chat/output.h"

namespace tessera::test {

struct RecordedCall {
  std::string name, arguments;
};

struct Recorded {
  std::string label;
  chat::OutputFormat format;
  std::string text;
  std::string reasoning, content;
  std::vector<RecordedCall> calls;
};

inline chat::OutputFormat fmt(chat::ToolFamily f, chat::ReasoningFormat r = chat::ReasoningFormat::None,
                              bool starts_in_reasoning = false) {
  return {f, r, true, starts_in_reasoning, {}, {}, {}};
}

inline std::vector<Recorded> recorded_outputs() {
  using chat::ReasoningFormat;
  using chat::ToolFamily;
  const std::string args = R"({"city": "Paris", "unit": "celsius"})";
  return {
      {"hermes",
       fmt(ToolFamily::Hermes),
       "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": " + args + "}\n</tool_call>",
       "",
       "",
       {{"get_weather", args}}},
      {"hermes text and two calls",
       fmt(ToolFamily::Hermes),
       "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n"
       "<tool_call>\n{\"arguments\": {\"city\": \"Oslo\"}, \"name\": \"get_weather\"}\n</tool_call>",
       "",
       "Let me check.",
       {{"get_weather", R"({"city": "Paris"})"}, {"get_weather", R"({"city": "Oslo"})"}}},
      {"qwen3 thinking then call",
       fmt(ToolFamily::Hermes, ReasoningFormat::Think),
       "<think>\nThe user wants the weather in Paris.\n</think>\n\n<tool_call>\n{\"name\": \"get_weather\", "
       "\"arguments\": " +
           args + "}\n</tool_call>",
       "The user wants the weather in Paris.",
       "",
       {{"get_weather", args}}},
      {"hermes unparseable stays text",
       fmt(ToolFamily::Hermes),
       "Use <tool_call> tags like <tool_call>{oops}</tool_call> here.",
       "",
       "Use <tool_call> tags like <tool_call>{oops}</tool_call> here.",
       {}},
      {"llama3 json",
       fmt(ToolFamily::Llama3),
       "{\"name\": \"get_weather\", \"parameters\": " + args + "}",
       "",
       "",
       {{"get_weather", args}}},
      {"llama3 python_tag",
       fmt(ToolFamily::Llama3),
       "<|python_tag|>{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}",
       "",
       "",
       {{"get_weather", R"({"city": "Paris"})"}}},
      {"llama3 plain json object is content", fmt(ToolFamily::Llama3), "{\"answer\": 42}", "", "{\"answer\": 42}", {}},
      {"mistral list",
       fmt(ToolFamily::Mistral),
       "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": " + args + ", \"id\": \"call00001\"}]",
       "",
       "",
       {{"get_weather", args}}},
      {"mistral args form",
       fmt(ToolFamily::Mistral),
       "[TOOL_CALLS]get_weather[ARGS]" + args,
       "",
       "",
       {{"get_weather", args}}},
      {"mistral call id form",
       fmt(ToolFamily::Mistral),
       "[TOOL_CALLS]get_weather[CALL_ID]call00001[ARGS]" + args + "[TOOL_CALLS]get_time[ARGS]{}",
       "",
       "",
       {{"get_weather", args}, {"get_time", "{}"}}},
      {"deepseek v3.1",
       fmt(ToolFamily::DeepSeek, ReasoningFormat::Think),
       "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>" + args +
           "<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
       "",
       "",
       {{"get_weather", args}}},
      {"deepseek r1",
       fmt(ToolFamily::DeepSeek, ReasoningFormat::Think, true),
       "Paris weather "
       "needed.\n</think>\n\n<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n"
       "```json\n" +
           args + "\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
       "Paris weather needed.",
       "",
       {{"get_weather", args}}},
      {"gpt-oss",
       fmt(ToolFamily::Harmony),
       "<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant<|channel|>commentary "
       "to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"Paris\"}<|call|>",
       "Need the weather.",
       "",
       {{"get_weather", R"({"city":"Paris"})"}}},
      {"gpt-oss final answer",
       fmt(ToolFamily::Harmony),
       "<|channel|>analysis<|message|>Simple.<|end|><|start|>assistant<|channel|>final<|message|>It is sunny.",
       "Simple.",
       "It is sunny.",
       {}},
      {"gemma4",
       fmt(ToolFamily::Gemma4),
       "<|tool_call>call:get_weather{city:<|\"|>Paris<|\"|>,unit:<|\"|>celsius<|\"|>}<tool_call|>",
       "",
       "",
       {{"get_weather", R"({"city":"Paris","unit":"celsius"})"}}},
      {"think without tools",
       {ToolFamily::Hermes, ReasoningFormat::Think, false, false, {}, {}, {}},
       "<think>\nHmm.\n</think>\n\nHello <tool_call> world",
       "Hmm.",
       "Hello <tool_call> world",
       {}},
      {"prompt opened think",
       {ToolFamily::Hermes, ReasoningFormat::Think, false, true, {}, {}, {}},
       "Let me think.\n</think>\n\nHi.",
       "Let me think.",
       "Hi.",
       {}},
  };
}

}  // namespace tessera::test
