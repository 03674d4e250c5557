// The block readers of tool_blocks.h. Each accepts exactly the shape its family's chat template writes for
// assistant tool_calls (../shared/fixtures/templates, case 06) plus the variants the models are known to emit.
// Arguments keep the model's own JSON text, so a stream's argument pieces add up to the final arguments.
#include "chat/tool_blocks.h"

#include <nlohmann/json.hpp>

#include "chat/derived.h"

namespace tessera::chat {

namespace {

constexpr size_t npos = std::string_view::npos;

bool is_object_text(std::string_view s) {
  const auto v = nlohmann::json::parse(s, nullptr, false);
  return v.is_object();
}

// A call's arguments, a JSON object opening at text[i] (i < text.size()), kept as the model's text in `args`:
// Complete (the object ends at `end`), Incomplete (`args` holds the prefix so far) or Invalid (not an object).
Scan read_args_object(std::string_view text, size_t i, std::string& args, size_t& end) {
  if (text[i] != '{') return Scan::Invalid;
  const auto v = scan_json_value(text, i);
  if (v.status == Scan::Invalid) return Scan::Invalid;
  if (v.status == Scan::Incomplete) {
    args = std::string(text.substr(i));
    return Scan::Incomplete;
  }
  args = std::string(text.substr(i, v.end - i));
  if (!is_object_text(args)) return Scan::Invalid;
  end = v.end;
  return Scan::Complete;
}

// One {"name": .., "arguments"|"parameters": {..}} object at text[pos] == '{'.
struct CallObject {
  Scan status = Scan::Invalid;
  size_t end = 0;
  bool has_name = false;
  ToolCall call;
  bool args_started = false;  // Incomplete: call.arguments holds the prefix read so far
};

CallObject read_call_object(std::string_view text, size_t pos) {
  CallObject out;
  bool have_args = false;
  size_t i = pos + 1;
  for (bool first = true;; first = false) {
    i = skip_ws(text, i);
    if (i >= text.size()) return out.status = Scan::Incomplete, out;
    if (text[i] == '}' && first) break;
    if (!first) {
      if (text[i] == '}') break;
      if (text[i] != ',') return out;
      i = skip_ws(text, i + 1);
    }
    std::string key;
    const auto k = scan_json_string(text, i, &key);
    if (k.status != Scan::Complete) return out.status = k.status, out;
    i = skip_ws(text, k.end);
    if (i >= text.size()) return out.status = Scan::Incomplete, out;
    if (text[i] != ':') return out;
    i = skip_ws(text, i + 1);
    if (i >= text.size()) return out.status = Scan::Incomplete, out;
    if (key == "name") {
      const auto n = scan_json_string(text, i, &out.call.name);
      if (n.status != Scan::Complete) return out.status = n.status, out;
      out.has_name = true;
      i = n.end;
    } else if (key == "arguments" || key == "parameters") {
      if (text[i] == '"') {  // arguments sent as a JSON string holding the object
        std::string inner;
        const auto s = scan_json_string(text, i, &inner);
        if (s.status != Scan::Complete) return out.status = s.status, out;
        if (!is_object_text(inner)) return out;
        out.call.arguments = std::move(inner);
        i = s.end;
      } else {
        size_t end = 0;
        const Scan a = read_args_object(text, i, out.call.arguments, end);
        if (a == Scan::Invalid) return out;
        if (a == Scan::Incomplete) return out.args_started = true, out.status = Scan::Incomplete, out;
        i = end;
      }
      have_args = true;
    } else {
      const auto v = scan_json_value(text, i);
      if (v.status != Scan::Complete) return out.status = v.status, out;
      i = v.end;
    }
  }
  if (!out.has_name || out.call.name.empty()) return out;
  if (!have_args) out.call.arguments = "{}";
  out.status = Scan::Complete;
  out.end = i + 1;
  return out;
}

// Adds an incomplete call object's partial call to `block` when it says whom it calls.
CallBlock incomplete(CallBlock block, const CallObject& obj) {
  block.status = Scan::Incomplete;
  if (obj.has_name && obj.args_started) block.calls.push_back(obj.call);
  return block;
}

// At text[i]: `literal` (true), the text ends inside it (Incomplete) or something else.
Scan expect(std::string_view text, size_t i, std::string_view literal) {
  const auto rest = text.substr(std::min(i, text.size()));
  if (rest.starts_with(literal)) return Scan::Complete;
  if (literal.starts_with(rest)) return Scan::Incomplete;
  return Scan::Invalid;
}

CallBlock read_hermes(std::string_view text, size_t i, bool final, const TextArguments* text_args) {
  CallBlock b;
  i = skip_ws(text, i);
  if (i >= text.size()) return b.status = Scan::Incomplete, b;
  if (text[i] != '{') return read_xml_call(text, i, final, text_args);
  const auto obj = read_call_object(text, i);
  if (obj.status == Scan::Incomplete) return incomplete(b, obj);
  if (obj.status == Scan::Invalid) return b;
  b.calls.push_back(obj.call);
  i = skip_ws(text, obj.end);
  constexpr std::string_view close = "</tool_call>";
  switch (expect(text, i, close)) {
    case Scan::Complete:
      return b.status = Scan::Complete, b.end = i + close.size(), b;
    case Scan::Incomplete:
      // The model stopped after the object without closing the tag: the call is whole all the same.
      if (final) return b.status = Scan::Complete, b.end = text.size(), b;
      return b.status = Scan::Incomplete, b;
    case Scan::Invalid:
      return b.calls.clear(), b;
  }
  return b;
}

// Llama 3: one or more call objects joined by ';' (the JSON form, or after <|python_tag|>).
CallBlock read_llama3(std::string_view text, size_t i, bool final) {
  CallBlock b;
  for (;;) {
    i = skip_ws(text, i);
    if (i >= text.size()) return b.status = final ? Scan::Invalid : Scan::Incomplete, b;
    if (text[i] != '{') return b.calls.clear(), b;
    const auto obj = read_call_object(text, i);
    if (obj.status == Scan::Incomplete) return incomplete(b, obj);
    if (obj.status == Scan::Invalid) return b.calls.clear(), b;
    b.calls.push_back(obj.call);
    i = skip_ws(text, obj.end);
    if (i >= text.size() && !final) return b.status = Scan::Incomplete, b;
    if (i < text.size() && text[i] == ';') {
      ++i;
      continue;
    }
    return b.status = Scan::Complete, b.end = i, b;
  }
}

CallBlock read_mistral(std::string_view text, size_t i, bool final) {
  CallBlock b;
  i = skip_ws(text, i);
  if (i >= text.size()) return b.status = Scan::Incomplete, b;
  if (text[i] == '[') {  // [{"name": .., "arguments": {..}, "id": ..}, ..]
    for (++i;;) {
      i = skip_ws(text, i);
      if (i >= text.size()) return b.status = Scan::Incomplete, b;
      if (text[i] != '{') return b.calls.clear(), b;
      const auto obj = read_call_object(text, i);
      if (obj.status == Scan::Incomplete) return incomplete(b, obj);
      if (obj.status == Scan::Invalid) return b.calls.clear(), b;
      b.calls.push_back(obj.call);
      i = skip_ws(text, obj.end);
      if (i >= text.size()) {
        if (final) return b.status = Scan::Complete, b.end = i, b;
        return b.status = Scan::Incomplete, b;
      }
      if (text[i] == ']') return b.status = Scan::Complete, b.end = i + 1, b;
      if (text[i] != ',') return b.calls.clear(), b;
      ++i;
    }
  }
  // name[ARGS]{..} or name[CALL_ID]id[ARGS]{..} (Mistral Small 3.2, Devstral, Magistral)
  const size_t bracket = text.find('[', i);
  if (bracket == npos) {
    for (size_t j = i; j < text.size(); ++j) {
      if (text[j] == ' ' || text[j] == '\n' || text[j] == '{') return b;
    }
    return b.status = Scan::Incomplete, b;
  }
  ToolCall call;
  call.name = std::string(text.substr(i, bracket - i));
  if (call.name.empty() || call.name.find_first_of(" \n\t{") != npos) return b;
  i = bracket;
  if (const auto id = expect(text, i, "[CALL_ID]"); id != Scan::Invalid) {
    if (id == Scan::Incomplete) return b.status = Scan::Incomplete, b;
    const size_t args = text.find('[', i + 9);
    if (args == npos) return b.status = Scan::Incomplete, b;
    i = args;
  }
  const auto args = expect(text, i, "[ARGS]");
  if (args != Scan::Complete) return b.status = args, b;
  i = skip_ws(text, i + 6);
  if (i >= text.size()) return b.status = Scan::Incomplete, b;
  size_t end = 0;
  const Scan a = read_args_object(text, i, call.arguments, end);
  if (a == Scan::Invalid) return b;
  b.calls.push_back(std::move(call));
  if (a == Scan::Incomplete) return b.status = Scan::Incomplete, b;
  return b.status = Scan::Complete, b.end = end, b;
}

constexpr std::string_view kDsCallsBegin = "<｜tool▁calls▁begin｜>";
constexpr std::string_view kDsCallsEnd = "<｜tool▁calls▁end｜>";
constexpr std::string_view kDsCallBegin = "<｜tool▁call▁begin｜>";
constexpr std::string_view kDsCallEnd = "<｜tool▁call▁end｜>";
constexpr std::string_view kDsSep = "<｜tool▁sep｜>";

// One <｜tool▁call▁begin｜>..<｜tool▁call▁end｜> at text[i] (just after the begin marker).
CallBlock read_deepseek_call(std::string_view text, size_t i, bool final) {
  CallBlock b;
  const size_t sep = text.find(kDsSep, i);
  if (sep == npos) return b.status = final ? Scan::Invalid : Scan::Incomplete, b;
  ToolCall call;
  std::string head(text.substr(i, sep - i));
  i = sep + kDsSep.size();
  bool fenced = false;
  if (head == "function") {  // R1 / V3: function<｜tool▁sep｜>name\n```json\n{..}\n```
    const size_t nl = text.find('\n', i);
    if (nl == npos) return b.status = Scan::Incomplete, b;
    call.name = std::string(text.substr(i, nl - i));
    i = nl + 1;
    const auto fence = expect(text, i, "```json");
    if (fence == Scan::Incomplete) return b.status = Scan::Incomplete, b;
    if (fence == Scan::Complete) {
      fenced = true;
      i += 7;
    }
  } else {
    call.name = std::move(head);
  }
  if (call.name.empty() || call.name.find_first_of("<\n") != npos) return b;
  i = skip_ws(text, i);
  if (i >= text.size()) return b.status = Scan::Incomplete, b;
  size_t args_end = 0;
  const Scan a = read_args_object(text, i, call.arguments, args_end);
  if (a == Scan::Invalid) return b;
  b.calls.push_back(std::move(call));
  if (a == Scan::Incomplete) return b.status = Scan::Incomplete, b;
  i = skip_ws(text, args_end);
  if (fenced) {
    const auto close = expect(text, i, "```");
    if (close == Scan::Invalid) return b.calls.clear(), b;
    if (close == Scan::Incomplete) return b.status = final ? Scan::Complete : Scan::Incomplete, b.end = i, b;
    i = skip_ws(text, i + 3);
  }
  const auto end = expect(text, i, kDsCallEnd);
  if (end == Scan::Invalid) return b.calls.clear(), b;
  if (end == Scan::Incomplete) return b.status = final ? Scan::Complete : Scan::Incomplete, b.end = text.size(), b;
  return b.status = Scan::Complete, b.end = i + kDsCallEnd.size(), b;
}

CallBlock read_deepseek(std::string_view text, size_t i, std::string_view marker, bool final) {
  CallBlock b;
  const bool grouped = marker == kDsCallsBegin;
  if (!grouped) i -= kDsCallBegin.size();  // the marker is the first call's own begin
  for (bool first = true;; first = false) {
    i = skip_ws(text, i);
    const auto call = expect(text, i, kDsCallBegin);
    if (call == Scan::Complete) {
      auto one = read_deepseek_call(text, i + kDsCallBegin.size(), final);
      for (auto& c : one.calls) b.calls.push_back(std::move(c));
      if (one.status != Scan::Complete) return one.status == Scan::Invalid ? CallBlock{} : (b.status = one.status, b);
      i = one.end;
      continue;
    }
    if (first && !grouped) return b;
    const bool at_end = i >= text.size();
    if (grouped) {
      const auto close = expect(text, i, kDsCallsEnd);
      if (close == Scan::Complete) return b.status = Scan::Complete, b.end = i + kDsCallsEnd.size(), b;
      if (close == Scan::Incomplete || call == Scan::Incomplete) {
        if (final && !b.calls.empty()) return b.status = Scan::Complete, b.end = text.size(), b;
        return b.status = final ? Scan::Invalid : Scan::Incomplete, b;
      }
      if (b.calls.empty()) return b;
      return b.status = Scan::Complete, b.end = i, b;
    }
    if (call == Scan::Incomplete && !at_end && !final) return b.status = Scan::Incomplete, b;
    if (at_end && !final) return b.status = Scan::Incomplete, b;
    return b.status = Scan::Complete, b.end = i, b;
  }
}

CallBlock read_gemma4(std::string_view text, size_t i) {
  CallBlock b;
  const auto head = expect(text, i, "call:");
  if (head != Scan::Complete) return b.status = head, b;
  i += 5;
  constexpr std::string_view close = "<tool_call|>";
  const size_t brace = text.find('{', i);
  const size_t end = text.find(close, i);
  if (end == npos) return b.status = Scan::Incomplete, b;  // Gemma's arguments are converted whole
  if (brace == npos || brace > end) return b;
  ToolCall call;
  call.name = std::string(text.substr(i, brace - i));
  if (call.name.empty() || call.name.find_first_of(" \n<") != npos) return b;
  auto args = gemma_arguments_to_json(text.substr(brace, end - brace));
  if (!args) return b;
  call.arguments = std::move(*args);
  b.calls.push_back(std::move(call));
  return b.status = Scan::Complete, b.end = end + close.size(), b;
}

}  // namespace

std::vector<std::string_view> tool_markers(const OutputFormat& format) {
  switch (format.tools) {
    case ToolFamily::Hermes:
      return {"<tool_call>"};
    case ToolFamily::Llama3:
      return {"<|python_tag|>"};  // (and '{' where the answer starts, which parse_output handles)
    case ToolFamily::Mistral:
      return {"[TOOL_CALLS]"};
    case ToolFamily::DeepSeek:
      return {kDsCallsBegin, kDsCallBegin};
    case ToolFamily::Gemma4:
      return {"<|tool_call>"};
    case ToolFamily::Derived:
      if (format.derived) return {format.derived->marker};
      return {};
    case ToolFamily::Harmony:
      return {};
  }
  return {};
}

CallBlock read_call_block(const OutputFormat& format, std::string_view text, size_t pos, std::string_view marker,
                          bool final) {
  const size_t i = pos + marker.size();
  switch (format.tools) {
    case ToolFamily::Hermes:
      return read_hermes(text, i, final, format.text_args.get());
    case ToolFamily::Llama3:
      return read_llama3(text, i, final);
    case ToolFamily::Mistral:
      return read_mistral(text, i, final);
    case ToolFamily::DeepSeek:
      return read_deepseek(text, i, marker, final);
    case ToolFamily::Gemma4:
      return read_gemma4(text, i);
    case ToolFamily::Derived:
      if (format.derived) return read_derived_block(*format.derived, text, pos, final, format.text_args.get());
      break;
    case ToolFamily::Harmony:
      break;
  }
  return {};
}

}  // namespace tessera::chat
