// ChatFormat: choosing between the model's Jinja template, a Jinja file and the named hand-written formats, and
// rendering OpenAI-style messages with either.
#include "tokenizer/chat_format.h"

#include <filesystem>
#include <fstream>
#include <vector>

#include "jinja/error.h"
#include "util/error.h"
#include "util/log.h"

namespace tessera {

namespace {

std::string names_list() {
  std::string out;
  for (auto n : chat_template_names()) out += (out.empty() ? "" : ", ") + std::string(n);
  return out;
}

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("--chat-template {}: cannot read", path.string());
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Message content as text for the hand-written formats: a string, or the text parts of a list.
std::string content_text(const nlohmann::ordered_json& content) {
  if (content.is_string()) return content.get<std::string>();
  if (content.is_null()) return "";
  std::string out;
  if (content.is_array()) {
    for (const auto& part : content) {
      if (part.is_object() && part.value("type", "") == "text" && part.contains("text") && part["text"].is_string())
        out += part["text"].get<std::string>();
    }
    return out;
  }
  fail("message content must be a string or a list of parts");
}

}  // namespace

ChatFormat::ChatFormat() = default;

ChatFormat ChatFormat::jinja(std::string_view source, std::string bos_text, std::string eos_text, std::string origin) {
  ChatFormat f;
  try {
    f.template_ = std::make_shared<const jinja::Template>(source);
  } catch (const jinja::JinjaError& e) {
    fail("{}: {}", origin, e.what());
  }
  f.origin_ = std::move(origin);
  f.source_ = std::string(source);
  f.bos_ = std::move(bos_text);
  f.eos_ = std::move(eos_text);
  return f;
}

ChatFormat ChatFormat::named(ChatTemplateKind kind, std::string bos_text, std::string eos_text) {
  ChatFormat f;
  f.kind_ = kind;
  f.bos_ = std::move(bos_text);
  f.eos_ = std::move(eos_text);
  return f;
}

ChatFormat ChatFormat::resolve(std::optional<std::string_view> override_arg,
                               std::optional<std::string_view> model_jinja, std::string bos_text, std::string eos_text,
                               bool fallback_chatml) {
  if (override_arg) {
    if (auto kind = chat_template_from_name(*override_arg))
      return named(*kind, std::move(bos_text), std::move(eos_text));
    const std::filesystem::path path(*override_arg);
    std::error_code ec;
    if (std::filesystem::is_regular_file(path, ec))
      return jinja(read_text(path), std::move(bos_text), std::move(eos_text), path.string());
    fail("--chat-template '{}' is neither a Jinja file nor a known name ({})", *override_arg, names_list());
  }
  if (model_jinja) {
    try {
      return jinja(*model_jinja, bos_text, eos_text);
    } catch (const Error& e) {
      // A template this interpreter cannot parse: the hand-written format of its family, when it is one.
      const auto kind = detect_chat_template(*model_jinja);
      if (!kind && !fallback_chatml) throw;
      log_warn("{}; chat uses the built-in {} format instead", e.what(),
               chat_template_name(kind.value_or(ChatTemplateKind::ChatML)));
      return named(kind.value_or(ChatTemplateKind::ChatML), std::move(bos_text), std::move(eos_text));
    }
  }
  if (fallback_chatml) {
    log_warn("the model has no tokenizer.chat_template; chat requests use chatml (choose with --chat-template)");
    return named(ChatTemplateKind::ChatML, std::move(bos_text), std::move(eos_text));
  }
  fail("the model has no tokenizer.chat_template; use --chat-template FILE or one of: {}", names_list());
}

std::string ChatFormat::render(const nlohmann::ordered_json& context, const jinja::RenderOptions& options) const {
  if (!context.is_object()) fail("the chat template context must be a JSON object");
  if (template_) {
    nlohmann::ordered_json ctx = context;
    if (!ctx.contains("bos_token")) ctx["bos_token"] = bos_;
    if (!ctx.contains("eos_token")) ctx["eos_token"] = eos_;
    return template_->render(ctx, options);
  }
  std::vector<ChatMessage> messages;
  if (context.contains("messages")) {
    const auto& list = context["messages"];
    if (!list.is_array()) fail("'messages' must be a list");
    for (const auto& m : list) {
      if (!m.is_object() || !m.contains("role") || !m["role"].is_string()) fail("each message needs a 'role'");
      messages.push_back({m["role"].get<std::string>(), content_text(m.value("content", nlohmann::ordered_json()))});
    }
  }
  const bool add_generation_prompt = context.value("add_generation_prompt", false);
  const std::string bos = context.contains("bos_token") ? context["bos_token"].get<std::string>() : bos_;
  const std::string eos = context.contains("eos_token") ? context["eos_token"].get<std::string>() : eos_;
  // The hand-written formats leave out the leading BOS already.
  return apply_chat_template(kind_, messages, add_generation_prompt, bos, eos);
}

std::string ChatFormat::prompt(const nlohmann::ordered_json& context, const jinja::RenderOptions& options) const {
  std::string text = render(context, options);
  const std::string bos = context.contains("bos_token") && context["bos_token"].is_string()
                              ? context["bos_token"].get<std::string>()
                              : bos_;
  if (template_ && !bos.empty() && text.starts_with(bos)) text.erase(0, bos.size());
  return text;
}

std::string ChatFormat::prompt(std::span<const ChatMessage> messages, bool add_generation_prompt) const {
  if (!template_) return apply_chat_template(kind_, messages, add_generation_prompt, bos_, eos_);
  nlohmann::ordered_json context = nlohmann::ordered_json::object();
  auto& list = context["messages"] = nlohmann::ordered_json::array();
  for (const auto& m : messages) list.push_back({{"role", m.role}, {"content", m.content}});
  context["add_generation_prompt"] = add_generation_prompt;
  return prompt(context);
}

std::string ChatFormat::description() const {
  if (template_) return "jinja (" + origin_ + ")";
  return std::string(chat_template_name(kind_));
}

}  // namespace tessera
