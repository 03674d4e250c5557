// libFuzzer target for the Jinja interpreter: any template text must parse or fail with a JinjaError, and
// rendering it (with a small chat context, under tight sandbox limits) must never crash, hang or exhaust memory.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "jinja/error.h"
#include "jinja/template.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  static const nlohmann::ordered_json context = nlohmann::ordered_json::parse(R"({
    "messages": [{"role": "system", "content": "Be brief."},
                 {"role": "user", "content": "What is the weather in Paris? {{ not a tag }}"},
                 {"role": "assistant", "content": "", "tool_calls": [{"id": "call00001", "type": "function",
                   "function": {"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}}]},
                 {"role": "tool", "tool_call_id": "call00001", "name": "get_weather", "content": "{\"t\": 21.5}"}],
    "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather",
               "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                              "required": ["city"]}}}],
    "add_generation_prompt": true, "bos_token": "<s>", "eos_token": "</s>", "enable_thinking": false})");
  tessera::jinja::RenderOptions options;
  options.now = tessera::jinja::DateTime{2026, 1, 15, 12, 0, 0};
  options.limits.max_loop_iterations = 20000;
  options.limits.max_call_depth = 16;
  options.limits.max_output_bytes = 1 << 20;
  try {
    const tessera::jinja::Template t(text);
    (void)t.render(context, options);
  } catch (const tessera::jinja::JinjaError&) {
  }
  return 0;
}
