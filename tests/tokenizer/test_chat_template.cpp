// Chat templates: detection from the models' real tokenizer.chat_template text, and rendering that matches what
// those Jinja templates produce (with the leading BOS left to the tokenizer).
#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/chat_template.h"
#include "tokenizer/published_templates.h"
#include "util/error.h"

namespace tessera {
namespace {

using namespace published_templates;

// ---- Rendering ----

const std::vector<ChatMessage>& conversation() {
  static const std::vector<ChatMessage> messages = {
      {"system", "You are a helpful assistant."},
      {"user", "Hello"},
      {"assistant", "Hi there!"},
      {"user", "How are you?"},
  };
  return messages;
}

struct FamilyCase {
  const char* model;
  std::string_view jinja;
  ChatTemplateKind kind;
  std::string_view bos;
  std::string_view eos;
  std::string_view body;           // the conversation itself
  std::string_view prompt_suffix;  // what add_generation_prompt appends
  std::string_view closing = "";   // what the template appends instead when there is no generation prompt
};

const std::vector<FamilyCase>& family_cases() {
  static const std::vector<FamilyCase> cases = {
      {"Qwen2_5", kQwen25, ChatTemplateKind::ChatML, "", "<|im_end|>",
       "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n"
       "<|im_start|>assistant\nHi there!<|im_end|>\n<|im_start|>user\nHow are you?<|im_end|>\n",
       "<|im_start|>assistant\n"},
      {"Llama3", kLlama3, ChatTemplateKind::Llama3, "<|begin_of_text|>", "<|eot_id|>",
       "<|start_header_id|>system<|end_header_id|>\n\nYou are a helpful assistant.<|eot_id|>"
       "<|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|>"
       "<|start_header_id|>assistant<|end_header_id|>\n\nHi there!<|eot_id|>"
       "<|start_header_id|>user<|end_header_id|>\n\nHow are you?<|eot_id|>",
       "<|start_header_id|>assistant<|end_header_id|>\n\n"},
      {"Llama3_1", kLlama31, ChatTemplateKind::Llama31, "<|begin_of_text|>", "<|eot_id|>",
       "<|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\n"
       "Today Date: 26 Jul 2024\n\nYou are a helpful assistant.<|eot_id|>"
       "<|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|>"
       "<|start_header_id|>assistant<|end_header_id|>\n\nHi there!<|eot_id|>"
       "<|start_header_id|>user<|end_header_id|>\n\nHow are you?<|eot_id|>",
       "<|start_header_id|>assistant<|end_header_id|>\n\n"},
      {"Llama2", kLlama2, ChatTemplateKind::Llama2, "<s>", "</s>",
       "[INST] <<SYS>>\nYou are a helpful assistant.\n<</SYS>>\n\nHello [/INST] Hi there! </s><s>[INST] How are you? "
       "[/INST]",
       ""},
      {"MistralV1", kMistralV1, ChatTemplateKind::MistralV1, "<s>", "</s>",
       " [INST] You are a helpful assistant.\n\nHello [/INST] Hi there!</s> [INST] How are you? [/INST]", ""},
      {"MistralV3", kMistralV3, ChatTemplateKind::MistralV3, "<s>", "</s>",
       "[INST] Hello[/INST] Hi there!</s>[INST] You are a helpful assistant.\n\nHow are you?[/INST]", ""},
      {"MistralNemo", kMistralNemo, ChatTemplateKind::MistralV3Tekken, "<s>", "</s>",
       "[INST]Hello[/INST]Hi there!</s>[INST]You are a helpful assistant.\n\nHow are you?[/INST]", ""},
      {"MistralLarge2411", kMistralLarge2411, ChatTemplateKind::MistralV7, "<s>", "</s>",
       "[SYSTEM_PROMPT] You are a helpful assistant.[/SYSTEM_PROMPT][INST] Hello[/INST] Hi there!</s>"
       "[INST] How are you?[/INST]",
       ""},
      {"MistralSmall3", kMistralSmall3, ChatTemplateKind::MistralV7Tekken, "<s>", "</s>",
       "[SYSTEM_PROMPT]You are a helpful assistant.[/SYSTEM_PROMPT][INST]Hello[/INST]Hi there!</s>"
       "[INST]How are you?[/INST]",
       ""},
      {"Gemma3", kGemma3, ChatTemplateKind::Gemma, "<bos>", "<eos>",
       "<start_of_turn>user\nYou are a helpful assistant.\n\nHello<end_of_turn>\n<start_of_turn>model\nHi "
       "there!<end_of_turn>\n<start_of_turn>user\nHow are you?<end_of_turn>\n",
       "<start_of_turn>model\n"},
      {"Phi3", kPhi3, ChatTemplateKind::Phi3, "<s>", "<|endoftext|>",
       "<|system|>\nYou are a helpful assistant.<|end|>\n<|user|>\nHello<|end|>\n<|assistant|>\nHi there!<|end|>\n"
       "<|user|>\nHow are you?<|end|>\n",
       "<|assistant|>\n", "<|endoftext|>"},
      {"Phi4", kPhi4, ChatTemplateKind::Phi4, "<|endoftext|>", "<|im_end|>",
       "<|im_start|>system<|im_sep|>You are a helpful assistant.<|im_end|><|im_start|>user<|im_sep|>Hello<|im_end|>"
       "<|im_start|>assistant<|im_sep|>Hi there!<|im_end|><|im_start|>user<|im_sep|>How are you?<|im_end|>",
       "<|im_start|>assistant<|im_sep|>"},
      {"DeepSeekCoder", kDeepSeekCoder, ChatTemplateKind::DeepSeekCoder, "<｜begin▁of▁sentence｜>", "<|EOT|>",
       "You are a helpful assistant.### Instruction:\nHello\n### Response:\nHi there!\n<|EOT|>\n"
       "### Instruction:\nHow are you?\n",
       "### Response:\n"},
      {"DeepSeekLlm", kDeepSeekLlm, ChatTemplateKind::DeepSeek2, "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>",
       "You are a helpful assistant.\n\nUser: Hello\n\nAssistant: Hi there!<｜end▁of▁sentence｜>User: How are you?\n\n",
       "Assistant:"},
      {"DeepSeekV3", kDeepSeekV3, ChatTemplateKind::DeepSeek3, "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>",
       "You are a helpful assistant.<｜User｜>Hello<｜Assistant｜>Hi there!<｜end▁of▁sentence｜><｜User｜>How are you?",
       "<｜Assistant｜>"},
      {"DeepSeekR1", kDeepSeekR1, ChatTemplateKind::DeepSeekR1, "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>",
       "You are a helpful assistant.<｜User｜>Hello<｜Assistant｜>Hi there!<｜end▁of▁sentence｜><｜User｜>How are you?",
       "<｜Assistant｜><think>\n"},
      {"Zephyr", kZephyr, ChatTemplateKind::Zephyr, "<s>", "</s>",
       "<|system|>\nYou are a helpful assistant.</s>\n<|user|>\nHello</s>\n<|assistant|>\nHi there!</s>\n"
       "<|user|>\nHow are you?</s>\n",
       "<|assistant|>\n"},
  };
  return cases;
}

class ChatTemplateFamily : public testing::TestWithParam<FamilyCase> {};

TEST_P(ChatTemplateFamily, DetectedFromTheModelsJinja) {
  const FamilyCase& c = GetParam();
  const auto kind = detect_chat_template(c.jinja);
  ASSERT_TRUE(kind.has_value());
  EXPECT_EQ(chat_template_name(*kind), chat_template_name(c.kind));
}

TEST_P(ChatTemplateFamily, RendersWithoutGenerationPrompt) {
  const FamilyCase& c = GetParam();
  const std::string expected = std::string(c.body) + std::string(c.closing);
  EXPECT_EQ(apply_chat_template(c.kind, conversation(), false, c.bos, c.eos), expected);
}

TEST_P(ChatTemplateFamily, RendersWithGenerationPrompt) {
  const FamilyCase& c = GetParam();
  const std::string expected = std::string(c.body) + std::string(c.prompt_suffix);
  EXPECT_EQ(apply_chat_template(c.kind, conversation(), true, c.bos, c.eos), expected);
}

INSTANTIATE_TEST_SUITE_P(Models, ChatTemplateFamily, testing::ValuesIn(family_cases()),
                         [](const testing::TestParamInfo<FamilyCase>& p) { return std::string(p.param.model); });

TEST(ChatTemplateDetect, OtherPublishedVariants) {
  EXPECT_EQ(detect_chat_template(kGemma2), ChatTemplateKind::Gemma);
  EXPECT_EQ(detect_chat_template(kPhi3Original), ChatTemplateKind::Phi3);
  EXPECT_EQ(detect_chat_template(kMistralV02Original), ChatTemplateKind::MistralV1);
}

TEST(ChatTemplateDetect, UnknownTemplatesAreNotGuessed) {
  EXPECT_EQ(detect_chat_template(""), std::nullopt);
  // Vicuna 1.1 style and Orion: neither is a supported family.
  EXPECT_EQ(detect_chat_template("{% for message in messages %}{% if message['role'] == 'user' %}{{ 'USER: ' + "
                                 "message['content'] + '\\n' }}{% else %}{{ 'ASSISTANT: ' + message['content'] + "
                                 "'</s>\\n' }}{% endif %}{% endfor %}{% if add_generation_prompt %}{{ 'ASSISTANT:' "
                                 "}}{% endif %}"),
            std::nullopt);
  EXPECT_EQ(detect_chat_template("{% for message in messages %}{% if loop.first %}{{ bos_token }}{% endif %}{% if "
                                 "message['role'] == 'user' %}{{ 'Human: ' + message['content'] + '\\n\\nAssistant: "
                                 "' + eos_token }}{% elif message['role'] == 'assistant' %}{{ message['content'] + "
                                 "eos_token }}{% endif %}{% endfor %}"),
            std::nullopt);
}

TEST(ChatTemplateRender, TrimsExactlyWhereTheTemplatesTrim) {
  const std::vector<ChatMessage> messages = {{"user", "  Hi \n"}, {"assistant", " Yo  "}};
  EXPECT_EQ(apply_chat_template(ChatTemplateKind::ChatML, messages, false, "", ""),
            "<|im_start|>user\n  Hi \n<|im_end|>\n<|im_start|>assistant\n Yo  <|im_end|>\n");
  EXPECT_EQ(apply_chat_template(ChatTemplateKind::Llama3, messages, false, "<|begin_of_text|>", "<|eot_id|>"),
            "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>"
            "\n\nYo<|eot_id|>");
  EXPECT_EQ(apply_chat_template(ChatTemplateKind::Llama2, messages, false, "<s>", "</s>"), "[INST] Hi [/INST] Yo </s>");
  EXPECT_EQ(apply_chat_template(ChatTemplateKind::Gemma, messages, false, "<bos>", "<eos>"),
            "<start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\nYo<end_of_turn>\n");
  // v3 trims only the assistant's text.
  EXPECT_EQ(apply_chat_template(ChatTemplateKind::MistralV3, messages, false, "<s>", "</s>"),
            "[INST]   Hi \n[/INST] Yo</s>");
}

TEST(ChatTemplateRender, OnlyTheLeadingBosIsLeftToTheTokenizer) {
  const std::vector<ChatMessage> messages = {
      {"user", "a"}, {"assistant", "b"}, {"user", "c"}, {"assistant", "d"}, {"user", "e"}};
  EXPECT_EQ(apply_chat_template(ChatTemplateKind::Llama2, messages, true, "<s>", "</s>"),
            "[INST] a [/INST] b </s><s>[INST] c [/INST] d </s><s>[INST] e [/INST]");
  // Gemma's template starts with BOS; a conversation without system prompt still loses only that one.
  EXPECT_EQ(apply_chat_template(ChatTemplateKind::Gemma, std::vector<ChatMessage>{{"user", "<bos>x"}}, false, "<bos>",
                                "<eos>"),
            "<start_of_turn>user\n<bos>x<end_of_turn>\n");
}

TEST(ChatTemplateRender, TemplateSpecificSystemHandling) {
  const std::vector<ChatMessage> no_system = {{"user", "Hi"}};
  // DeepSeek-Coder supplies its own system prompt when the conversation has none.
  EXPECT_EQ(apply_chat_template(ChatTemplateKind::DeepSeekCoder, no_system, true, "", "<|EOT|>"),
            "You are an AI programming assistant, utilizing the Deepseek Coder model, developed by Deepseek Company, "
            "and you only answer questions related to computer science. For politically sensitive questions, "
            "security and privacy issues, and other non-computer science questions, you will refuse to answer\n"
            "### Instruction:\nHi\n### Response:\n");
  // Llama 3.1 always writes its system header.
  EXPECT_EQ(apply_chat_template(ChatTemplateKind::Llama31, no_system, false, "<|begin_of_text|>", "<|eot_id|>"),
            "<|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\nToday Date: 26 "
            "Jul 2024\n\n<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>");
  // Mistral v3 attaches the system prompt to the last message only when that is a user turn.
  const std::vector<ChatMessage> ends_with_answer = {{"system", "S"}, {"user", "Q"}, {"assistant", "A"}};
  EXPECT_EQ(apply_chat_template(ChatTemplateKind::MistralV3, ends_with_answer, false, "<s>", "</s>"),
            "[INST] Q[/INST] A</s>");
  // DeepSeek-V3 gathers every system message in front; R1 keeps the last one and hides past reasoning.
  const std::vector<ChatMessage> two_systems = {
      {"system", "S1"}, {"user", "Q"}, {"system", "S2"}, {"assistant", "<think>hmm</think>A"}};
  EXPECT_EQ(apply_chat_template(ChatTemplateKind::DeepSeek3, two_systems, false, "", ""),
            "S1\n\nS2<｜User｜>Q<｜Assistant｜><think>hmm</think>A<｜end▁of▁sentence｜>");
  EXPECT_EQ(apply_chat_template(ChatTemplateKind::DeepSeekR1, two_systems, false, "", ""),
            "S2<｜User｜>Q<｜Assistant｜>A<｜end▁of▁sentence｜>");
}

TEST(ChatTemplateRender, RejectsUnknownRolesAndMisplacedSystemMessages) {
  const std::vector<ChatMessage> tool = {{"user", "Hi"}, {"tool", "42"}};
  try {
    apply_chat_template(ChatTemplateKind::ChatML, tool, true, "", "");
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("messages[1] has role 'tool'"), std::string::npos) << e.what();
  }
  const std::vector<ChatMessage> late_system = {{"user", "Hi"}, {"system", "S"}};
  for (ChatTemplateKind kind : {ChatTemplateKind::Llama2, ChatTemplateKind::Gemma, ChatTemplateKind::MistralV1,
                                ChatTemplateKind::MistralV3, ChatTemplateKind::MistralV3Tekken}) {
    EXPECT_THROW(apply_chat_template(kind, late_system, true, "<s>", "</s>"), Error) << chat_template_name(kind);
  }
  // Role-generic templates take it where it stands.
  EXPECT_EQ(apply_chat_template(ChatTemplateKind::ChatML, late_system, false, "", ""),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>system\nS<|im_end|>\n");
}

// ---- Names and resolution ----

TEST(ChatTemplateNames, EveryNameRoundTrips) {
  const std::vector<std::string_view> names = chat_template_names();
  EXPECT_EQ(names.size(), 17u);
  for (std::string_view name : names) {
    const auto kind = chat_template_from_name(name);
    ASSERT_TRUE(kind.has_value()) << name;
    EXPECT_EQ(chat_template_name(*kind), name);
  }
  EXPECT_EQ(chat_template_from_name("chatml"), ChatTemplateKind::ChatML);
  EXPECT_EQ(chat_template_from_name("llama3"), ChatTemplateKind::Llama3);
  EXPECT_EQ(chat_template_from_name("deepseek"), ChatTemplateKind::DeepSeekCoder);
  EXPECT_EQ(chat_template_from_name("ChatML"), std::nullopt);
  EXPECT_EQ(chat_template_from_name(""), std::nullopt);
}

std::string error_of(std::optional<std::string_view> name, std::optional<std::string_view> jinja) {
  try {
    resolve_chat_template(name, jinja);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(ChatTemplateResolve, OverrideWinsThenDetectionThenError) {
  EXPECT_EQ(resolve_chat_template("gemma", kLlama3), ChatTemplateKind::Gemma);
  EXPECT_EQ(resolve_chat_template(std::nullopt, kLlama3), ChatTemplateKind::Llama3);
  EXPECT_EQ(resolve_chat_template("phi3", std::nullopt), ChatTemplateKind::Phi3);

  const std::string unrecognised = error_of(std::nullopt, "{{ messages }}");
  EXPECT_EQ(unrecognised.rfind("unrecognised chat template in tokenizer.chat_template; use --chat-template NAME with "
                               "one of: chatml, llama2, llama3, ",
                               0),
            0u)
      << unrecognised;
  for (std::string_view name : chat_template_names()) {
    EXPECT_NE(unrecognised.find(name), std::string::npos) << name;
  }
  EXPECT_NE(error_of("llama4", kLlama3).find("unknown chat template 'llama4'"), std::string::npos);
  EXPECT_NE(error_of("llama4", kLlama3).find("chatml, llama2"), std::string::npos);
  EXPECT_NE(error_of(std::nullopt, std::nullopt).find("no tokenizer.chat_template"), std::string::npos);
}

}  // namespace
}  // namespace tessera
