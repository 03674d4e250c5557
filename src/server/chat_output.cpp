// ChatOutput and the forced-call grammar (chat_output.h).
#include "server/chat_output.h"

#include "chat/derived.h"
#include "grammar/parser.h"
#include "grammar/tool_call.h"
#include "server/openai_api.h"

namespace tessera::server {

using nlohmann::json;

static_assert(chat::kMemberPath == grammar::kMemberPath && chat::kItemPath == grammar::kItemPath);

chat::OutputFormat output_format(std::string_view template_source, const ChatTools& tools, std::string_view prompt,
                                 std::string_view family) {
  return output_format(chat::detect_output_format(template_source), tools, prompt, family);
}

chat::OutputFormat output_format(const chat::OutputFormat& template_format, const ChatTools& tools,
                                 std::string_view prompt, std::string_view family) {
  chat::OutputFormat f = template_format;
  if (const auto named = chat::tool_family_from_name(family); named && *named != f.tools) {
    f.tools = *named;
    f.derived = nullptr;  // the template's markup is not the named family's
  }
  f.parse_tools = tools.offered();
  f.starts_in_reasoning = chat::prompt_opens_reasoning(prompt, f);
  if (f.parse_tools && f.derived && !f.derived->json_args) {
    auto text = std::make_shared<chat::TextArguments>();
    for (const auto& fn : tools.functions) {
      for (auto& key : grammar::text_parameters(fn.parameters.dump())) (*text)[fn.name].insert(std::move(key));
    }
    f.text_args = std::move(text);
  }
  return f;
}

bool parses_output(const chat::OutputFormat& f) {
  return f.parse_tools || f.reasoning != chat::ReasoningFormat::None || f.tools == chat::ToolFamily::Harmony;
}

namespace {

// A derived pattern (slot bytes in text) as grammar pieces.
std::vector<grammar::CallPiece> pieces(std::string_view pattern) {
  std::vector<grammar::CallPiece> out;
  for (char c : pattern) {
    using K = grammar::CallPiece::Kind;
    const K kind = c == chat::kName    ? K::Name
                   : c == chat::kArgs  ? K::Args
                   : c == chat::kId    ? K::Id
                   : c == chat::kIndex ? K::Index
                   : c == chat::kKey   ? K::Key
                   : c == chat::kValue ? K::Value
                                       : K::Text;
    if (kind != K::Text) {
      out.push_back({kind, {}});
    } else if (out.empty() || out.back().kind != K::Text) {
      out.push_back({K::Text, std::string(1, c)});
    } else {
      out.back().text += c;
    }
  }
  return out;
}

}  // namespace

grammar::CallSyntax call_syntax(const chat::DerivedSyntax& d) {
  grammar::CallSyntax out;
  out.open = d.open;
  out.sep = d.sep;
  out.close = d.close;
  out.call = pieces(d.call);
  out.several = d.several;
  out.json_args = d.json_args;
  if (!d.json_args) {
    out.pair = pieces(d.pair);
    out.pair_json = pieces(d.pair_json);
    out.pair_sep = d.pair_sep;
    out.sorted_keys = d.sorted_keys;
    out.item = pieces(d.item);
    out.member = pieces(d.member);
    out.python_bools = d.python_bools;
  }
  return out;
}

OutputGrammar forced_tool_grammar(const ChatTools& tools, const chat::OutputFormat& f,
                                  std::string_view template_source) {
  using grammar::ToolCallFormat;
  ToolCallFormat format = ToolCallFormat::Hermes;
  switch (f.tools) {
    case chat::ToolFamily::Hermes:
      format = ToolCallFormat::Hermes;
      break;
    case chat::ToolFamily::Llama3:
      format = ToolCallFormat::Llama3;
      break;
    case chat::ToolFamily::Mistral:
      format = template_source.find("[ARGS]") != std::string_view::npos ? ToolCallFormat::MistralArgs
                                                                        : ToolCallFormat::Mistral;
      break;
    case chat::ToolFamily::DeepSeek:
      format = template_source.find("```json") != std::string_view::npos ? ToolCallFormat::DeepSeekR1
                                                                         : ToolCallFormat::DeepSeek;
      break;
    case chat::ToolFamily::Harmony:
      format = ToolCallFormat::Harmony;
      break;
    case chat::ToolFamily::Gemma4:
      format = ToolCallFormat::Gemma4;
      break;
    case chat::ToolFamily::Derived:
      if (f.derived) break;
      invalid_param("tool_choice",
                    "A required or named 'tool_choice' is not supported for this model's tool-call format ({}): "
                    "use 'auto'.",
                    chat::tool_family_name(f.tools));
  }
  std::vector<grammar::ToolSchema> schemas;
  for (const auto& fn : tools.functions) {
    if (tools.choice == ToolChoice::Named && fn.name != tools.named) continue;
    // No schema means any arguments, but they are still an object.
    schemas.push_back({fn.name, fn.parameters.empty() ? std::string(R"({"type":"object"})") : fn.parameters.dump()});
  }
  // A prompt that opened the reasoning block gets it closed first: the call is the answer.
  const std::string prefix = f.starts_in_reasoning ? chat::reasoning_exit(f) : "";
  OutputGrammar g;
  try {
    const bool several = tools.choice == ToolChoice::Required && tools.parallel;
    // A family whose template writes pair markup (Qwen 3.5's and GLM's XML inside <tool_call>) is forced in that
    // markup: what the model was trained on. Its reader ends a call at </tool_call>, which no value may hold then.
    const bool markup = f.derived && (f.tools == chat::ToolFamily::Derived ||
                                      (f.tools == chat::ToolFamily::Hermes && !f.derived->json_args));
    grammar::CallSyntax syntax = markup ? call_syntax(*f.derived) : grammar::CallSyntax{};
    if (markup && f.tools == chat::ToolFamily::Hermes) syntax.avoid = {"</tool_call>"};
    g.text = markup ? grammar::tool_call_grammar(schemas, syntax, several, prefix)
                    : grammar::tool_call_grammar(schemas, format, several, prefix);
    g.compiled = std::make_shared<grammar::Grammar>(grammar::parse_grammar(g.text));
  } catch (const Error& e) {
    invalid_param("tools", "Invalid 'tools': {}", e.what());
  }
  return g;
}

ChatOutput::ChatOutput(chat::OutputFormat format) : format_(format), stream_(format), rng_(std::random_device{}()) {}

std::string ChatOutput::new_id() {
  static constexpr std::string_view kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  std::string id = "call_";
  std::uniform_int_distribution<size_t> pick(0, kAlphabet.size() - 1);
  for (int i = 0; i < 24; ++i) id += kAlphabet[pick(rng_)];
  return id;
}

json ChatOutput::message(std::string_view text) {
  const chat::ParsedOutput p = chat::parse_output(text, format_, true);
  json m = {{"role", "assistant"}, {"content", p.content}, {"refusal", nullptr}};
  if (!p.reasoning.empty()) m["reasoning_content"] = p.reasoning;
  if (!p.calls.empty()) {
    if (p.content.empty()) m["content"] = nullptr;
    json calls = json::array();
    for (const auto& c : p.calls) {
      calls.push_back(
          {{"id", new_id()}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
    }
    m["tool_calls"] = std::move(calls);
    calls_ = p.calls.size();
  }
  return m;
}

std::vector<json> ChatOutput::deltas(const chat::OutputDelta& d) {
  std::vector<json> out;
  if (!d.reasoning.empty()) out.push_back({{"reasoning_content", d.reasoning}});
  if (!d.content.empty()) out.push_back({{"content", d.content}});
  for (const auto& c : d.calls) {
    json call = {{"index", c.index}};
    if (c.first) {
      ids_.push_back(new_id());
      call["id"] = ids_.back();
      call["type"] = "function";
      call["function"] = {{"name", c.name}, {"arguments", ""}};
      ++calls_;
    } else {
      call["function"] = {{"arguments", c.arguments}};
    }
    out.push_back({{"tool_calls", json::array({call})}});
  }
  return out;
}

std::vector<json> ChatOutput::push(std::string_view piece) { return deltas(stream_.push(piece)); }

std::vector<json> ChatOutput::finish() { return deltas(stream_.finish()); }

}  // namespace tessera::server
