// The harmony reader: the output is a run of messages, each "<|start|>assistant" (optional for the first),
// a header with "<|channel|>NAME" and maybe "to=functions.NAME", then "<|message|>" and the body up to <|end|>,
// <|call|> or <|return|>. analysis bodies are reasoning, calls to functions.* are tool calls, the rest content.
#include "chat/harmony.h"

#include <array>

#include "chat/json_scan.h"

namespace tessera::chat {

namespace {

constexpr size_t npos = std::string_view::npos;
constexpr std::string_view kStart = "<|start|>", kChannel = "<|channel|>", kMessage = "<|message|>";
constexpr std::array<std::string_view, 4> kBodyEnds = {"<|end|>", "<|call|>", "<|return|>", kStart};

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

// The word after `key` in a header (up to a space or a marker).
std::string_view header_word(std::string_view header, std::string_view key) {
  const size_t k = header.find(key);
  if (k == npos) return {};
  size_t e = k + key.size();
  while (e < header.size() && !is_space(header[e]) && header[e] != '<') ++e;
  return header.substr(k + key.size(), e - k - key.size());
}

size_t held_tail(std::string_view text, std::initializer_list<std::string_view> markers) {
  size_t hold = 0;
  for (auto m : markers) hold = std::max(hold, partial_marker_suffix(text, m));
  return hold;
}

}  // namespace

ParsedOutput parse_harmony(std::string_view text, bool parse_tools, bool final) {
  ParsedOutput out;
  size_t i = 0;
  while (i < text.size()) {
    const std::string_view rest = text.substr(i);
    if (!rest.starts_with(kStart) && !rest.starts_with(kChannel)) {
      // Text outside any message: content up to the next message.
      size_t next = std::min(rest.find(kStart), rest.find(kChannel));
      std::string_view plain = rest.substr(0, next);
      if (next == npos && !final) plain.remove_suffix(held_tail(plain, {kStart, kChannel}));
      out.content += plain;
      if (next == npos) break;
      i += next;
      continue;
    }
    const size_t msg = rest.find(kMessage);
    if (msg == npos) {
      if (final) out.content += rest;  // a header that never opened its message: keep the text
      break;
    }
    const std::string_view header = rest.substr(0, msg);
    const std::string_view channel = header_word(header, kChannel);
    const std::string_view recipient = header_word(header, "to=");
    const size_t body_start = msg + kMessage.size();
    size_t body_end = npos, end_len = 0;
    for (auto m : kBodyEnds) {
      const size_t p = rest.find(m, body_start);
      if (p < body_end) body_end = p, end_len = m == kStart ? 0 : m.size();
    }
    std::string_view body = rest.substr(body_start, body_end == npos ? npos : body_end - body_start);
    const bool open = body_end == npos && !final;
    if (open) body.remove_suffix(held_tail(body, {kBodyEnds[0], kBodyEnds[1], kBodyEnds[2], kBodyEnds[3]}));
    if (parse_tools && recipient.starts_with("functions.") && recipient.size() > 10) {
      std::string_view args = trim(body);
      out.calls.push_back({std::string(recipient.substr(10)), std::string(args.empty() && !open ? "{}" : args)});
    } else if (channel == "analysis") {
      out.reasoning += body;
    } else {
      out.content += body;
    }
    if (body_end == npos) break;
    i += body_end + end_len;
  }
  return out;
}

}  // namespace tessera::chat
