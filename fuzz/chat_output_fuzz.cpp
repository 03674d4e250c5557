// libFuzzer target for the chat output parser (src/chat): any model output, in any family's format, must parse
// without a crash; every tool call's arguments must be a JSON object (except gpt-oss's, passed on as written); and
// streaming the same bytes in two pieces must never send more than the final parse holds for well-formed output:
// each delta only adds. The first byte picks the family, the reasoning markers and the flags; the second the
// split point.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string_view>

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

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  OutputFormat f;
  f.tools = static_cast<ToolFamily>(data[0] % 6);
  f.reasoning = static_cast<ReasoningFormat>((data[0] / 6) % 3);
  f.parse_tools = (data[0] & 0x40) == 0;
  f.starts_in_reasoning = (data[0] & 0x80) != 0;
  const std::string_view text(reinterpret_cast<const char*>(data + 2), size - 2);
  const auto whole = tessera::chat::parse_output(text, f, true);
  check_calls(whole, f.tools);
  (void)tessera::chat::parse_output(text, f, false);

  const size_t split = text.empty() ? 0 : data[1] % (text.size() + 1);
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
