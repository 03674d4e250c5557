// Reasoning markers learned from a chat template rather than known by name: the template renders an assistant turn
// whose reasoning is a sentinel, and the literal text around the sentinel is what opens and closes the block (and,
// for some, what introduces the answer after it). parse_output reads ReasoningFormat::Derived with them.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "chat/output.h"

namespace tessera::chat {

constexpr std::string_view kReasoningSentinel = "__tessera_reasoning__";
constexpr std::string_view kAnswerSentinel = "__tessera_answer__";

struct ReasoningDerivation {
  bool renders = false;                   // some assistant turn showed the reasoning sentinel
  std::optional<ReasoningMarkup> markup;  // the markers, when they read back the template's renders
  // The model's part of the turn with kReasoningSentinel and kAnswerSentinel, from the end of the generation
  // prompt (thinking on) to the answer; it starts inside the block where that prompt opens it.
  std::string sample;
  bool prompt_opens = false;  // the generation prompt with thinking on ends inside an opened block
  bool off_closes = false;    // with thinking off it writes the closing marker (an empty block, or the close alone)
  std::string off_prompt;     // that generation prompt (thinking off), from the user's message on
};

// Renders with reasoning under `reasoning_content`, `reasoning` or `thinking` and the thinking switches templates
// read (enable_thinking, thinking, thinking_mode) set on, then off. No throw: a template that fails or writes no
// reasoning gives no markup.
ReasoningDerivation derive_reasoning(std::string_view template_source, std::string_view bos, std::string_view eos);

// `f` with the derived markers, unless they are those of an exact format (kept, as for Qwen3's <think>) or none
// were derived (then `f` as detected).
void apply_derived_reasoning(OutputFormat& f, const ReasoningDerivation& d);

}  // namespace tessera::chat
