// The one render both derivations (tool-call syntax, reasoning markers) learn from: a context whose messages start
// with a sentinel user turn, the clock pinned so that renders compare, and the text after that turn.
#pragma once

#include <exception>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "jinja/template.h"

namespace tessera::chat {

inline constexpr std::string_view kSentinelUser = "__tessera_user__";

// What `t` renders after kSentinelUser for `ctx`; nullopt when the template raises or drops the turn.
inline std::optional<std::string> render_after_sentinel_user(const jinja::Template& t,
                                                             const nlohmann::ordered_json& ctx) {
  try {
    jinja::RenderOptions options;
    options.now = jinja::DateTime{2026, 1, 15, 12, 0, 0};
    const std::string out = t.render(ctx, options);
    const size_t at = out.find(kSentinelUser);
    if (at == std::string::npos) return std::nullopt;
    return out.substr(at + kSentinelUser.size());
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

}  // namespace tessera::chat
