// The chat format a model uses: its tokenizer.chat_template Jinja rendered by tessera::jinja exactly as Hugging
// Face's apply_chat_template does, or one of the hand-written formats of chat_template.h by name (the fallback for
// files without a template).
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "jinja/template.h"
#include "tokenizer/chat_template.h"

namespace tessera {

class ChatFormat {
 public:
  ChatFormat();  // chatml, the default of llama.cpp's server too
  static ChatFormat jinja(std::string_view source, std::string bos_text, std::string eos_text,
                          std::string origin = "the model's tokenizer.chat_template");
  static ChatFormat named(ChatTemplateKind kind, std::string bos_text, std::string eos_text);

  // The template: `override_arg` (--chat-template) is a file with Jinja text or a name from chat_template.h;
  // without one the model's Jinja; without that an Error naming the choices (or chatml when `fallback_chatml`).
  static ChatFormat resolve(std::optional<std::string_view> override_arg, std::optional<std::string_view> model_jinja,
                            std::string bos_text, std::string eos_text, bool fallback_chatml = false);

  // Renders a template context as Jinja2 would: `messages` in OpenAI form (string or list-of-parts content,
  // assistant tool_calls, tool messages), `add_generation_prompt`, `tools`, and any extra keyword (e.g.
  // chat_template_kwargs' enable_thinking, reasoning_effort). bos_token/eos_token are added unless given. The
  // output is exact: a BOS the template writes stays.
  std::string render(const nlohmann::ordered_json& context, const jinja::RenderOptions& options = {}) const;

  // The text to tokenize: render() without a BOS the template writes at the very start, because the tokenizer
  // adds its own (as llama.cpp does).
  std::string prompt(const nlohmann::ordered_json& context, const jinja::RenderOptions& options = {}) const;
  // The same for plain role/content messages, with add_generation_prompt.
  std::string prompt(std::span<const ChatMessage> messages, bool add_generation_prompt = true) const;

  bool is_jinja() const { return template_ != nullptr; }
  // The Jinja text ("" for the hand-written formats): its markers tell how the model writes tool calls.
  const std::string& source() const { return source_; }
  // "jinja (the model's tokenizer.chat_template)" or the hand-written format's name, for logs and /health.
  std::string description() const;
  const std::string& bos_text() const { return bos_; }
  const std::string& eos_text() const { return eos_; }

 private:
  std::shared_ptr<const jinja::Template> template_;
  ChatTemplateKind kind_ = ChatTemplateKind::ChatML;
  std::string origin_;
  std::string source_;
  std::string bos_, eos_;
};

}  // namespace tessera
