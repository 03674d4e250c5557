// Internal to src/chat: the per-family readers of one block of tool calls, starting at the family's marker.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "chat/json_scan.h"
#include "chat/output.h"

namespace tessera::chat {

struct CallBlock {
  Scan status = Scan::Invalid;
  size_t end = 0;               // Complete: one past the block
  std::vector<ToolCall> calls;  // Incomplete: the calls read so far, the last one possibly partial
};

// The strings that open a block in the format's output (Harmony has its own reader).
std::vector<std::string_view> tool_markers(const OutputFormat& format);

// Reads the block at text[pos], which starts with `marker`. final: the text will not grow, so a block that lacks
// only its closing marker is accepted.
CallBlock read_call_block(const OutputFormat& format, std::string_view text, size_t pos, std::string_view marker,
                          bool final);

// The XML bodies of <tool_call> (Qwen3-Coder / Qwen3.5, GLM 4.5+), read from text[i] just after the marker and
// any whitespace; complete calls only. text_args: the parameters kept as text (OutputFormat::text_args).
CallBlock read_xml_call(std::string_view text, size_t i, bool final, const TextArguments* text_args = nullptr);

// A derived syntax's block at text[pos] (where its marker was found).
CallBlock read_derived_block(const DerivedSyntax& syntax, std::string_view text, size_t pos, bool final,
                             const TextArguments* text_args = nullptr);

// Gemma 4's argument syntax ({key:<|"|>text<|"|>,n:1,list:[..]}) as JSON text; nullopt when it is not that.
std::optional<std::string> gemma_arguments_to_json(std::string_view text);

}  // namespace tessera::chat
