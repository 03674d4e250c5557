// Chat templates: family detection from Jinja markers and hand-written renderers that reproduce each family's
// Jinja output (Hugging Face renders with trim_blocks and lstrip_blocks, so only the literal text counts).
#include "tokenizer/chat_template.h"

#include <fmt/format.h>

#include <array>
#include <utility>

#include "util/error.h"

namespace tessera {

namespace {

struct NamedKind {
  ChatTemplateKind kind;
  std::string_view name;
};

constexpr std::array<NamedKind, 17> kKinds{{
    {ChatTemplateKind::ChatML, "chatml"},
    {ChatTemplateKind::Llama2, "llama2"},
    {ChatTemplateKind::Llama3, "llama3"},
    {ChatTemplateKind::Llama31, "llama3.1"},
    {ChatTemplateKind::MistralV1, "mistral-v1"},
    {ChatTemplateKind::MistralV3, "mistral-v3"},
    {ChatTemplateKind::MistralV3Tekken, "mistral-v3-tekken"},
    {ChatTemplateKind::MistralV7, "mistral-v7"},
    {ChatTemplateKind::MistralV7Tekken, "mistral-v7-tekken"},
    {ChatTemplateKind::Gemma, "gemma"},
    {ChatTemplateKind::Phi3, "phi3"},
    {ChatTemplateKind::Phi4, "phi4"},
    {ChatTemplateKind::DeepSeekCoder, "deepseek"},
    {ChatTemplateKind::DeepSeek2, "deepseek2"},
    {ChatTemplateKind::DeepSeek3, "deepseek3"},
    {ChatTemplateKind::DeepSeekR1, "deepseek-r1"},
    {ChatTemplateKind::Zephyr, "zephyr"},
}};

// DeepSeek spells these inline in its templates rather than through bos_token/eos_token.
constexpr std::string_view kDeepSeekUser = "<｜User｜>";
constexpr std::string_view kDeepSeekAssistant = "<｜Assistant｜>";
constexpr std::string_view kDeepSeekEnd = "<｜end▁of▁sentence｜>";

// Written by the DeepSeek-Coder-Instruct template when the conversation has no system message.
constexpr std::string_view kDeepSeekCoderSystem =
    "You are an AI programming assistant, utilizing the Deepseek Coder model, developed by Deepseek Company, and "
    "you only answer questions related to computer science. For politically sensitive questions, security and "
    "privacy issues, and other non-computer science questions, you will refuse to answer\n";

// Llama 3.1's template always opens with this system header; "26 Jul 2024" is its date_string default.
constexpr std::string_view kLlama31SystemHeader =
    "<|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n";

enum class Role { System, User, Assistant };

struct Turn {
  Role role;
  std::string_view role_name;
  std::string_view content;
};

// Python's str.strip() and Jinja's trim, restricted to ASCII whitespace.
std::string_view trim(std::string_view s) {
  constexpr std::string_view kSpace = " \t\n\r\f\v";
  const size_t begin = s.find_first_not_of(kSpace);
  if (begin == std::string_view::npos) return {};
  return s.substr(begin, s.find_last_not_of(kSpace) - begin + 1);
}

// Everything a renderer needs; output accumulates in out.
struct Render {
  ChatTemplateKind kind;
  std::vector<Turn> turns;
  bool add_generation_prompt;
  std::string_view bos;
  std::string_view eos;
  std::string out;

  template <typename... Parts>
  void put(const Parts&... parts) {
    (out.append(parts), ...);
  }
};

// The system message a template takes only in first place, and the turns after it. A later system message is
// an error because those templates raise_exception on it (or would silently drop it).
std::pair<std::optional<std::string_view>, std::span<const Turn>> leading_system(const Render& r) {
  std::span<const Turn> rest(r.turns);
  std::optional<std::string_view> system;
  if (!rest.empty() && rest.front().role == Role::System) {
    system = rest.front().content;
    rest = rest.subspan(1);
  }
  for (size_t i = 0; i < rest.size(); ++i) {
    if (rest[i].role == Role::System) {
      fail("the {} chat template accepts a system message only as the first message, but messages[{}] is one",
           chat_template_name(r.kind), i + (system ? 1 : 0));
    }
  }
  return {system, rest};
}

void render_chatml(Render& r) {
  for (const Turn& t : r.turns) r.put("<|im_start|>", t.role_name, "\n", t.content, "<|im_end|>\n");
  if (r.add_generation_prompt) r.put("<|im_start|>assistant\n");
}

void render_llama3_turns(Render& r, std::span<const Turn> turns) {
  for (const Turn& t : turns)
    r.put("<|start_header_id|>", t.role_name, "<|end_header_id|>\n\n", trim(t.content), "<|eot_id|>");
  if (r.add_generation_prompt) r.put("<|start_header_id|>assistant<|end_header_id|>\n\n");
}

void render_llama3(Render& r) {
  if (!r.turns.empty()) r.put(r.bos);
  render_llama3_turns(r, r.turns);
}

void render_llama31(Render& r) {
  // Only a leading system message moves into the header; later ones render as ordinary turns.
  std::span<const Turn> rest(r.turns);
  std::string_view system;
  if (!rest.empty() && rest.front().role == Role::System) {
    system = trim(rest.front().content);
    rest = rest.subspan(1);
  }
  r.put(r.bos, kLlama31SystemHeader, system, "<|eot_id|>");
  render_llama3_turns(r, rest);
}

void render_llama2(Render& r) {
  const auto [system, turns] = leading_system(r);
  for (size_t i = 0; i < turns.size(); ++i) {
    // The template strips the whole combined text, so the system block is only trimmed on its outer side.
    std::string content;
    if (i == 0 && system) content = fmt::format("<<SYS>>\n{}\n<</SYS>>\n\n", *system);
    content.append(turns[i].content);
    if (turns[i].role == Role::User) {
      r.put(r.bos, "[INST] ", trim(content), " [/INST]");
    } else {
      r.put(" ", trim(content), " ", r.eos);
    }
  }
}

void render_mistral_v1(Render& r) {
  const auto [system, turns] = leading_system(r);
  r.put(r.bos);
  for (size_t i = 0; i < turns.size(); ++i) {
    const Turn& t = turns[i];
    if (t.role == Role::User) {
      r.put(" [INST] ");
      if (i == 0 && system) r.put(*system, "\n\n");
      r.put(t.content, " [/INST]");
    } else {
      r.put(" ", t.content, r.eos);
    }
  }
}

// v3 and v3-tekken put the system message in front of the last message when that is a user turn (and drop
// it otherwise), as mistral-common does.
void render_mistral_v3(Render& r, bool tekken) {
  const auto [system, turns] = leading_system(r);
  const std::string_view inst = tekken ? "[INST]" : "[INST] ";
  r.put(r.bos);
  for (size_t i = 0; i < turns.size(); ++i) {
    const Turn& t = turns[i];
    if (t.role == Role::User) {
      r.put(inst);
      if (i + 1 == turns.size() && system) r.put(*system, "\n\n");
      r.put(t.content, "[/INST]");
    } else if (tekken) {
      r.put(t.content, r.eos);
    } else {
      r.put(" ", trim(t.content), r.eos);
    }
  }
}

void render_mistral_v7(Render& r) {
  r.put(r.bos);
  for (const Turn& t : r.turns) {
    switch (t.role) {
      case Role::System:
        r.put("[SYSTEM_PROMPT] ", t.content, "[/SYSTEM_PROMPT]");
        break;
      case Role::User:
        r.put("[INST] ", t.content, "[/INST]");
        break;
      case Role::Assistant:
        r.put(" ", t.content, r.eos);
        break;
    }
  }
}

// Mistral Small 3 (2501) renders a system message wherever it stands; 3.1 only takes a leading one.
void render_mistral_v7_tekken(Render& r) {
  r.put(r.bos);
  for (const Turn& t : r.turns) {
    switch (t.role) {
      case Role::System:
        r.put("[SYSTEM_PROMPT]", t.content, "[/SYSTEM_PROMPT]");
        break;
      case Role::User:
        r.put("[INST]", t.content, "[/INST]");
        break;
      case Role::Assistant:
        r.put(t.content, r.eos);
        break;
    }
  }
}

// Gemma 3's template; Gemma 1 and 2 render the same conversations and reject a system message outright.
void render_gemma(Render& r) {
  const auto [system, turns] = leading_system(r);
  r.put(r.bos);
  for (size_t i = 0; i < turns.size(); ++i) {
    const Turn& t = turns[i];
    r.put("<start_of_turn>", t.role == Role::Assistant ? "model" : "user", "\n");
    if (i == 0 && system) r.put(*system, "\n\n");
    r.put(trim(t.content), "<end_of_turn>\n");
  }
  if (r.add_generation_prompt) r.put("<start_of_turn>model\n");
}

void render_phi3(Render& r) {
  for (const Turn& t : r.turns) r.put("<|", t.role_name, "|>\n", t.content, "<|end|>\n");
  r.put(r.add_generation_prompt ? std::string_view("<|assistant|>\n") : r.eos);
}

void render_phi4(Render& r) {
  for (const Turn& t : r.turns) r.put("<|im_start|>", t.role_name, "<|im_sep|>", t.content, "<|im_end|>");
  if (r.add_generation_prompt) r.put("<|im_start|>assistant<|im_sep|>");
}

void render_deepseek_coder(Render& r) {
  r.put(r.bos);
  bool has_system = false;
  for (const Turn& t : r.turns) has_system = has_system || t.role == Role::System;
  if (!has_system) r.put(kDeepSeekCoderSystem);
  for (const Turn& t : r.turns) {
    switch (t.role) {
      case Role::System:
        r.put(t.content);
        break;
      case Role::User:
        r.put("### Instruction:\n", t.content, "\n");
        break;
      case Role::Assistant:
        r.put("### Response:\n", t.content, "\n<|EOT|>\n");
        break;
    }
  }
  if (r.add_generation_prompt) r.put("### Response:\n");
}

void render_deepseek2(Render& r) {
  r.put(r.bos);
  for (const Turn& t : r.turns) {
    switch (t.role) {
      case Role::System:
        r.put(t.content, "\n\n");
        break;
      case Role::User:
        r.put("User: ", t.content, "\n\n");
        break;
      case Role::Assistant:
        r.put("Assistant: ", t.content, r.eos);
        break;
    }
  }
  if (r.add_generation_prompt) r.put("Assistant:");
}

// V3 gathers every system message (joined by blank lines) in front; the R1 distills keep only the last one,
// show only the answer part of past assistant turns, and open a <think> block for the new one.
void render_deepseek3(Render& r, bool r1) {
  r.put(r.bos);
  bool first_system = true;
  std::string_view last_system;
  for (const Turn& t : r.turns) {
    if (t.role != Role::System) continue;
    if (r1) {
      last_system = t.content;
    } else {
      r.put(first_system ? "" : "\n\n", t.content);
    }
    first_system = false;
  }
  r.put(last_system);
  for (const Turn& t : r.turns) {
    if (t.role == Role::User) {
      r.put(kDeepSeekUser, t.content);
    } else if (t.role == Role::Assistant) {
      std::string_view content = t.content;
      const size_t think_end = r1 ? content.rfind("</think>") : std::string_view::npos;
      if (think_end != std::string_view::npos) content.remove_prefix(think_end + std::string_view("</think>").size());
      r.put(kDeepSeekAssistant, content, kDeepSeekEnd);
    }
  }
  if (r.add_generation_prompt) r.put(kDeepSeekAssistant, r1 ? "<think>\n" : "");
}

void render_zephyr(Render& r) {
  for (const Turn& t : r.turns) r.put("<|", t.role_name, "|>\n", t.content, r.eos, "\n");
  if (r.add_generation_prompt && !r.turns.empty()) r.put("<|assistant|>\n");
}

std::string names_list() {
  std::string list;
  for (const NamedKind& k : kKinds) {
    if (!list.empty()) list += ", ";
    list += k.name;
  }
  return list;
}

}  // namespace

std::string_view chat_template_name(ChatTemplateKind kind) {
  for (const NamedKind& k : kKinds) {
    if (k.kind == kind) return k.name;
  }
  fail("unknown chat template kind {}", static_cast<int>(kind));
}

std::optional<ChatTemplateKind> chat_template_from_name(std::string_view name) {
  for (const NamedKind& k : kKinds) {
    if (k.name == name) return k.kind;
  }
  return std::nullopt;
}

std::vector<std::string_view> chat_template_names() {
  std::vector<std::string_view> names;
  names.reserve(kKinds.size());
  for (const NamedKind& k : kKinds) names.push_back(k.name);
  return names;
}

std::optional<ChatTemplateKind> detect_chat_template(std::string_view jinja) {
  auto has = [jinja](std::string_view marker) { return jinja.find(marker) != std::string_view::npos; };
  using K = ChatTemplateKind;
  // Most specific first: Phi-4 reuses ChatML's tokens, and several families share [INST].
  if (has("<|im_sep|>")) return K::Phi4;
  if (has("<|im_start|>")) return K::ChatML;
  if (has("<|start_header_id|>")) return has("Cutting Knowledge Date") ? K::Llama31 : K::Llama3;
  if (has("<start_of_turn>")) return K::Gemma;
  if (has("[SYSTEM_PROMPT]")) return has("[SYSTEM_PROMPT] ") || has("[INST] ") ? K::MistralV7 : K::MistralV7Tekken;
  if (has("[INST]")) {
    if (has("<<SYS>>")) return K::Llama2;
    // v1 writes " [INST] "; the older Mistral v0.1/v0.2 templates (" [/INST]") predate mistral-common, whose
    // v1 format is what those models were trained on.
    if (has(" [INST]") || has(" [/INST]")) return K::MistralV1;
    return has("[INST] ") ? K::MistralV3 : K::MistralV3Tekken;
  }
  if (has(kDeepSeekUser)) return has("<think>") ? K::DeepSeekR1 : K::DeepSeek3;
  if (has("<|assistant|>") && has("<|end|>")) return K::Phi3;
  if (has("<|user|>") && has("<|assistant|>") && has("eos_token")) return K::Zephyr;
  if (has("### Instruction:") && has("### Response:") && has("<|EOT|>")) return K::DeepSeekCoder;
  if (has("User: ") && has("Assistant:")) return K::DeepSeek2;
  return std::nullopt;
}

std::string apply_chat_template(ChatTemplateKind kind, std::span<const ChatMessage> messages,
                                bool add_generation_prompt, std::string_view bos_text, std::string_view eos_text) {
  Render r{kind, {}, add_generation_prompt, bos_text, eos_text, {}};
  r.turns.reserve(messages.size());
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string& role = messages[i].role;
    Role parsed;
    if (role == "system") {
      parsed = Role::System;
    } else if (role == "user") {
      parsed = Role::User;
    } else if (role == "assistant") {
      parsed = Role::Assistant;
    } else {
      fail("messages[{}] has role '{}'; the {} chat template accepts system, user and assistant", i, role,
           chat_template_name(kind));
    }
    r.turns.push_back({parsed, role, messages[i].content});
  }

  switch (kind) {
    case ChatTemplateKind::ChatML:
      render_chatml(r);
      break;
    case ChatTemplateKind::Llama2:
      render_llama2(r);
      break;
    case ChatTemplateKind::Llama3:
      render_llama3(r);
      break;
    case ChatTemplateKind::Llama31:
      render_llama31(r);
      break;
    case ChatTemplateKind::MistralV1:
      render_mistral_v1(r);
      break;
    case ChatTemplateKind::MistralV3:
      render_mistral_v3(r, false);
      break;
    case ChatTemplateKind::MistralV3Tekken:
      render_mistral_v3(r, true);
      break;
    case ChatTemplateKind::MistralV7:
      render_mistral_v7(r);
      break;
    case ChatTemplateKind::MistralV7Tekken:
      render_mistral_v7_tekken(r);
      break;
    case ChatTemplateKind::Gemma:
      render_gemma(r);
      break;
    case ChatTemplateKind::Phi3:
      render_phi3(r);
      break;
    case ChatTemplateKind::Phi4:
      render_phi4(r);
      break;
    case ChatTemplateKind::DeepSeekCoder:
      render_deepseek_coder(r);
      break;
    case ChatTemplateKind::DeepSeek2:
      render_deepseek2(r);
      break;
    case ChatTemplateKind::DeepSeek3:
      render_deepseek3(r, false);
      break;
    case ChatTemplateKind::DeepSeekR1:
      render_deepseek3(r, true);
      break;
    case ChatTemplateKind::Zephyr:
      render_zephyr(r);
      break;
  }

  // The tokenizer adds BOS itself (llama.cpp leaves it out of the rendered text for the same reason).
  if (!bos_text.empty() && std::string_view(r.out).starts_with(bos_text)) r.out.erase(0, bos_text.size());
  return std::move(r.out);
}

ChatTemplateKind resolve_chat_template(std::optional<std::string_view> override_name,
                                       std::optional<std::string_view> model_jinja) {
  if (override_name) {
    if (auto kind = chat_template_from_name(*override_name)) return *kind;
    fail("unknown chat template '{}'; use --chat-template NAME with one of: {}", *override_name, names_list());
  }
  if (!model_jinja) {
    fail("the model has no tokenizer.chat_template; use --chat-template NAME with one of: {}", names_list());
  }
  if (auto kind = detect_chat_template(*model_jinja)) return *kind;
  fail("unrecognised chat template in tokenizer.chat_template; use --chat-template NAME with one of: {}", names_list());
}

}  // namespace tessera
