// Internal to src/chat: gpt-oss's harmony output (<|channel|>analysis / commentary to=functions.NAME / final).
#pragma once

#include <string_view>

#include "chat/output.h"

namespace tessera::chat {

ParsedOutput parse_harmony(std::string_view text, bool parse_tools, bool final);

}  // namespace tessera::chat
