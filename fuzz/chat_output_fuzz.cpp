// libFuzzer target for the chat output parser (src/chat): any model output, in any family's format, must parse
// without a crash; every tool call's arguments must be a JSON object (except gpt-oss's, passed on as written); and
// streaming the same bytes in two pieces must never send more than the final parse holds for well-formed output:
// each delta only adds. The first byte picks the family (its low six bits from 54 on: one of three derived
// syntaxes, JSON arguments with call numbers, pair arguments with typed values, a JSON list with ids), the
// reasoning markers (<think>, Gemma's channel, or derived ones: Kimi K3's with the answer's introduction, MiniMax
// M3's) and the flags; the second the split point.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <nlohmann/json.hpp>
#include <string_view>
#include <vector>

#include "chat/derived.h"
#include "chat/output.h"
#include "chat/stream.h"

namespace {

using tessera::chat::OutputFormat;
using tessera::chat::ReasoningFormat;
using tessera::chat::ToolFamily;

void check_calls(const tessera::chat::ParsedOutput& p, ToolFamily family) {
  if (family == ToolFamily::Harmony) return;
  for (const auto& c : p.calls) {
    if (c.name.empty()) abort();
    if (!nlohmann::json::parse(c.arguments, nullptr, false).is_object()) abort();
  }
}

// Syntaxes of the shapes derive_tool_syntax learns (Kimi K2, DeepSeek V4 with MiniMax M3's nested values, MiniMax
// M1 / GigaChat).
std::shared_ptr<const tessera::chat::DerivedSyntax> derived(int which) {
  using tessera::chat::DerivedSyntax;
  static const auto all = [] {
    std::vector<std::shared_ptr<const DerivedSyntax>> v;
    DerivedSyntax a;
    a.open = "<|tool_calls_section_begin|>";
    a.call = "<|tool_call_begin|>functions.\x01:\x04<|tool_call_argument_begin|>\x02<|tool_call_end|>";
    a.close = "<|tool_calls_section_end|>";
    a.several = true;
    a.marker = a.open;
    v.push_back(std::make_shared<DerivedSyntax>(a));
    DerivedSyntax b;
    b.open = "<tc>\n";
    b.call = "<invoke name=\"\x01\">\n\x02\n</invoke>\n";
    b.close = "</tc>";
    b.several = true;
    b.json_args = false;
    b.pair = "<p name=\"\x05\" s=\"1\">\x06</p>";
    b.pair_json = "<p name=\"\x05\" s=\"0\">\x06</p>";
    b.pair_sep = "\n";
    b.item = "<i>\x06</i>";  // lists and objects as nested markup (MiniMax M3's shape)
    b.member = "<m k=\"\x05\">\x06</m>";
    b.marker = "<tc>";
    v.push_back(std::make_shared<DerivedSyntax>(b));
    DerivedSyntax c;
    c.open = "<calls>[";
    c.call = "{\"name\": \"\x01\", \"arguments\": \x02, \"id\": \"\x03\"}";
    c.sep = ", ";
    c.close = "]</calls>";
    c.several = true;
    c.marker = "<calls>";
    v.push_back(std::make_shared<DerivedSyntax>(c));
    return v;
  }();
  return all[which];
}

// Reasoning markers of the shapes derive_reasoning learns: Kimi K3's (with the answer's introduction), MiniMax M3's.
tessera::chat::ReasoningMarkup markup(int which) {
  if (which == 0) return {"<|open|>think<|sep|>", "<|close|>think<|sep|>", "<|open|>response<|sep|>"};
  return {"<mm:think>", "</mm:think>", ""};
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  OutputFormat f;
  const int low = data[0] & 0x3f;
  if (low < 54) {
    f.tools = static_cast<ToolFamily>(low % 6);
    f.reasoning = static_cast<ReasoningFormat>((low / 6) % 4);
    f.markup = markup((low / 6) / 4 % 2);
  } else {  // 54..62: a derived syntax; 63 too, as the first
    f.tools = ToolFamily::Derived;
    f.derived = derived((low - 54) % 3);
    f.reasoning = static_cast<ReasoningFormat>(((low - 54) / 3) % 4);
    f.markup = markup(low % 2);
  }
  f.parse_tools = (data[0] & 0x40) == 0;
  f.starts_in_reasoning = (data[0] & 0x80) != 0;
  const std::string_view text(reinterpret_cast<const char*>(data + 2), size - 2);
  const auto whole = tessera::chat::parse_output(text, f, true);
  check_calls(whole, f.tools);
  (void)tessera::chat::parse_output(text, f, false);

  const size_t split = text.empty() ? 0 : data[1] % (text.size() + 1);
  // Reasoning only grows, whatever follows: a prefix's reasoning is a prefix of the whole's.
  if (!whole.reasoning.starts_with(tessera::chat::parse_output(text.substr(0, split), f, false).reasoning)) abort();
  tessera::chat::OutputStream s(f);
  std::string reasoning, content;
  for (auto piece : {text.substr(0, split), text.substr(split)}) {
    const auto d = s.push(piece);
    reasoning += d.reasoning;
    content += d.content;
  }
  const auto last = s.finish();
  reasoning += last.reasoning;
  content += last.content;
  // What was sent is what the stream says it sent: deltas only ever add to it.
  if (reasoning != s.sent().reasoning || content != s.sent().content) abort();
  return 0;
}
