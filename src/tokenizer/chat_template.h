// Chat templates: recognises a model family from its tokenizer.chat_template Jinja text and renders a
// conversation the way that Jinja renders it with Hugging Face's defaults (no Jinja engine involved).
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tessera {

struct ChatMessage {
  std::string role;  // "system", "user" or "assistant"
  std::string content;
};

// Names (see chat_template_names()) follow llama.cpp's --chat-template where llama.cpp has the same format.
enum class ChatTemplateKind {
  ChatML,           // "chatml": Qwen, Yi, OpenHermes, ... <|im_start|>role\n...<|im_end|>
  Llama2,           // "llama2": Llama-2-chat, [INST] <<SYS>> ... <</SYS>> ... [/INST]
  Llama3,           // "llama3": Llama-3-Instruct, <|start_header_id|>role<|end_header_id|>
  Llama31,          // "llama3.1": Llama 3.1-3.3, Llama 3 plus the "Cutting Knowledge Date" system header
  MistralV1,        // "mistral-v1": Mistral-7B-Instruct v0.1/v0.2, Mixtral-8x7B " [INST] ... [/INST]"
  MistralV3,        // "mistral-v3": Mistral-7B-Instruct v0.3, Mixtral-8x22B "[INST] ...[/INST]"
  MistralV3Tekken,  // "mistral-v3-tekken": Mistral-Nemo "[INST]...[/INST]"
  MistralV7,        // "mistral-v7": Mistral-Large-2411 "[SYSTEM_PROMPT] ...[/SYSTEM_PROMPT][INST] ...[/INST]"
  MistralV7Tekken,  // "mistral-v7-tekken": Mistral-Small-3 "[SYSTEM_PROMPT]...[/SYSTEM_PROMPT][INST]...[/INST]"
  Gemma,            // "gemma": Gemma 1-3, <start_of_turn>user/model, system folded into the first user turn
  Phi3,             // "phi3": Phi-3, Phi-3.5, <|user|>\n...<|end|>
  Phi4,             // "phi4": Phi-4, <|im_start|>role<|im_sep|>
  DeepSeekCoder,    // "deepseek": DeepSeek-Coder-Instruct, ### Instruction: / ### Response:
  DeepSeek2,        // "deepseek2": deepseek-llm-chat, DeepSeek-V2, "User: ...\n\nAssistant: ..."
  DeepSeek3,        // "deepseek3": DeepSeek-V3, <｜User｜>...<｜Assistant｜>...<｜end▁of▁sentence｜>
  DeepSeekR1,       // "deepseek-r1": DeepSeek-R1 distills, deepseek3 that drops past thinking and opens <think>
  Zephyr,           // "zephyr": zephyr-7b, <|user|>\n...</s>
};

std::string_view chat_template_name(ChatTemplateKind kind);
std::optional<ChatTemplateKind> chat_template_from_name(std::string_view name);
std::vector<std::string_view> chat_template_names();

// Recognises the family by the markers its Jinja text spells; nullopt when none fits.
std::optional<ChatTemplateKind> detect_chat_template(std::string_view jinja);

// Renders the conversation as the family's Jinja template would, with these deliberate differences:
// - a BOS the template writes at the very start is left out, as llama.cpp does, because the tokenizer adds it
//   (BOS/EOS written elsewhere, e.g. between Llama 2 turns, are kept, spelt as bos_text/eos_text);
// - roles need not alternate (templates that raise_exception on that are rendered anyway);
// - no model-specific default system prompt is invented for the ChatML and Mistral families;
// - roles other than system/user/assistant, and a system message after the first message in templates that
//   only take a leading one, are an Error.
// add_generation_prompt appends the assistant header where the template has one.
std::string apply_chat_template(ChatTemplateKind kind, std::span<const ChatMessage> messages,
                                bool add_generation_prompt, std::string_view bos_text, std::string_view eos_text);

// An explicit name (--chat-template) wins; else detection from the model's Jinja text; else an Error that
// lists the valid names.
ChatTemplateKind resolve_chat_template(std::optional<std::string_view> override_name,
                                       std::optional<std::string_view> model_jinja);

}  // namespace tessera
