// parse_output for the families of output.h except gpt-oss (harmony.cpp): the reasoning block first, then the
// answer scanned for the family's call markers. Whitespace next to a reasoning block or a call is dropped, and a
// partial parse holds back trailing whitespace and any tail that may still become a marker.
#include "chat/output.h"

#include "chat/harmony.h"
#include "chat/tool_blocks.h"

namespace tessera::chat {

namespace {

constexpr size_t npos = std::string_view::npos;

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

std::string_view ltrim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  return s;
}
std::string_view rtrim(std::string_view s) {
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}
void rtrim(std::string& s) {
  while (!s.empty() && is_space(s.back())) s.pop_back();
}

struct ReasoningMarkers {
  std::string_view open, close, answer;
};

ReasoningMarkers markers(ReasoningFormat f) {
  switch (f) {
    case ReasoningFormat::Think:
      return {"<think>", "</think>", {}};
    case ReasoningFormat::GemmaChannel:
      return {"<|channel>thought", "<channel|>", {}};
    case ReasoningFormat::Derived:
    case ReasoningFormat::None:
      break;
  }
  return {};
}

ReasoningMarkers markers(const OutputFormat& f) {
  if (f.reasoning == ReasoningFormat::Derived) return {f.markup.open, f.markup.close, f.markup.answer};
  return markers(f.reasoning);
}

size_t skip_space(std::string_view text, size_t j) {
  while (j < text.size() && is_space(text[j])) ++j;
  return j;
}

// Content assembly: leading whitespace is dropped after the start, a reasoning block or a call.
struct Content {
  std::string& out;
  bool strip_leading = true;
  void add(std::string_view s) {
    if (strip_leading) s = ltrim(s);
    if (s.empty()) return;
    out += s;
    strip_leading = false;
  }
};

// Reads the reasoning block at the start of `text`; returns where the answer starts, or npos when the text (so far)
// is all reasoning.
size_t read_reasoning(std::string_view text, const OutputFormat& f, bool final, ParsedOutput& out) {
  const auto [open, close, answer] = markers(f);
  if (open.empty() || close.empty()) return 0;  // a derived format without its markers reads no reasoning
  const size_t first = skip_space(text, 0);
  const std::string_view head = text.substr(first);
  size_t start = 0;
  if (head.starts_with(open)) {
    start = first + open.size();
  } else if (!final && open.starts_with(head)) {
    return npos;  // may still become the opening marker
  } else if (!f.starts_in_reasoning) {
    return 0;
  }
  const size_t end = text.find(close, start);
  if (end == npos) {
    std::string_view r = text.substr(start);
    if (!final) r = rtrim(r.substr(0, r.size() - partial_marker_suffix(r, close)));
    out.reasoning = std::string(ltrim(rtrim(r)));
    return npos;
  }
  out.reasoning = std::string(ltrim(rtrim(text.substr(start, end - start))));
  const size_t after = end + close.size();
  if (answer.empty()) return after;
  // The text the template writes before the answer is markup, not content.
  const size_t j = skip_space(text, after);
  const std::string_view rest = text.substr(j);
  if (rest.starts_with(answer)) return j + answer.size();
  if (!final && answer.starts_with(rest)) return npos;  // may still become it
  return after;
}

struct Found {
  size_t pos = npos;
  std::string_view marker;
};

Found find_marker(std::string_view text, size_t from, const std::vector<std::string_view>& list) {
  Found best;
  for (auto m : list) {
    const size_t p = text.find(m, from);
    if (p < best.pos) best = {p, m};
  }
  return best;
}

void read_answer(std::string_view text, size_t i, const OutputFormat& f, bool final, ParsedOutput& out) {
  Content content{out.content};
  if (!f.parse_tools) {
    content.add(text.substr(i));
    return;
  }
  const auto list = tool_markers(f);
  for (;;) {
    Found at = find_marker(text, i, list);
    if (f.tools == ToolFamily::Llama3 && out.content.empty() && out.calls.empty()) {
      // Llama 3's JSON form: the answer is the call.
      const size_t j = [&] {
        size_t k = i;
        while (k < text.size() && is_space(text[k])) ++k;
        return k;
      }();
      if (j < text.size() && text[j] == '{' && j < at.pos) at = {j, {}};
    }
    if (at.pos == npos) {
      std::string_view rest = text.substr(i);
      if (!final) {
        size_t hold = 0;
        for (auto m : list) hold = std::max(hold, partial_marker_suffix(rest, m));
        rest = rtrim(rest.substr(0, rest.size() - hold));
      }
      content.add(rest);
      return;
    }
    content.add(text.substr(i, at.pos - i));
    const CallBlock block = read_call_block(f, text, at.pos, at.marker, final);
    if (block.status == Scan::Complete || (block.status == Scan::Incomplete && !final)) {
      rtrim(out.content);
      for (const auto& c : block.calls) out.calls.push_back(c);
      if (block.status == Scan::Incomplete) return;
      i = block.end;
      content.strip_leading = true;
      continue;
    }
    // Not a call after all: the marker is text.
    const size_t n = std::max<size_t>(1, at.marker.size());
    content.add(text.substr(at.pos, n));
    i = at.pos + n;
  }
}

}  // namespace

ParsedOutput parse_output(std::string_view text, const OutputFormat& format, bool final) {
  ParsedOutput out;
  if (format.tools == ToolFamily::Harmony) return parse_harmony(text, format.parse_tools, final);
  size_t i = 0;
  if (format.reasoning != ReasoningFormat::None) {
    i = read_reasoning(text, format, final, out);
    if (i == npos) return out;
  }
  read_answer(text, i, format, final, out);
  return out;
}

OutputFormat detect_output_format(std::string_view t) {
  auto has = [&](std::string_view s) { return t.find(s) != npos; };
  OutputFormat f;
  if (has("<|channel|>") && has("<|message|>")) {
    f.tools = ToolFamily::Harmony;
  } else if (has("<|tool_call>")) {
    f.tools = ToolFamily::Gemma4;
  } else if (has("tool▁calls▁begin") || has("tool▁call▁begin")) {
    f.tools = ToolFamily::DeepSeek;
  } else if (has("[TOOL_CALLS]")) {
    f.tools = ToolFamily::Mistral;
  } else if (has("<tool_call>")) {
    f.tools = ToolFamily::Hermes;
  } else if (has("<|python_tag|>") || (has("<|start_header_id|>") && has("\"parameters\""))) {
    f.tools = ToolFamily::Llama3;
  }
  if (has("</think>")) {
    f.reasoning = ReasoningFormat::Think;
  } else if (has("<|channel>thought") && has("<channel|>")) {
    f.reasoning = ReasoningFormat::GemmaChannel;
  }
  return f;
}

namespace {
constexpr std::pair<ToolFamily, std::string_view> kNames[] = {
    {ToolFamily::Hermes, "hermes"},     {ToolFamily::Llama3, "llama3"},   {ToolFamily::Mistral, "mistral"},
    {ToolFamily::DeepSeek, "deepseek"}, {ToolFamily::Harmony, "harmony"}, {ToolFamily::Gemma4, "gemma4"}};
}  // namespace

std::optional<ToolFamily> tool_family_from_name(std::string_view name) {
  for (const auto& [f, n] : kNames) {
    if (n == name) return f;
  }
  return std::nullopt;
}

std::string_view tool_family_name(ToolFamily family) {
  if (family == ToolFamily::Derived) return "derived";
  for (const auto& [f, n] : kNames) {
    if (f == family) return n;
  }
  return "hermes";
}

namespace {

bool opens(std::string_view prompt, ReasoningMarkers m) {
  if (m.open.empty() || m.close.empty()) return false;
  const std::string_view p = rtrim(prompt);
  const size_t o = p.rfind(m.open);
  if (o == npos) return false;
  // Opened in the generation prompt's tail and not closed after it.
  return p.find(m.close, o) == npos && p.size() - o <= m.open.size() + 1;
}

}  // namespace

bool prompt_opens_reasoning(std::string_view prompt, const OutputFormat& format) {
  return opens(prompt, markers(format));
}

bool prompt_opens_reasoning(std::string_view prompt, ReasoningFormat format) { return opens(prompt, markers(format)); }

std::string reasoning_exit(const OutputFormat& format) {
  switch (format.reasoning) {
    case ReasoningFormat::Think:
      return "</think>\n\n";
    case ReasoningFormat::GemmaChannel:
      return "<channel|>";
    case ReasoningFormat::Derived:
      return format.markup.close + format.markup.answer;
    case ReasoningFormat::None:
      break;
  }
  return {};
}

}  // namespace tessera::chat
