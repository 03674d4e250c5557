// libFuzzer target for chat templates: any tokenizer.chat_template text must be recognised or refused with an
// Error, and rendering arbitrary message contents must never crash.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/chat_template.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    (void)tessera::resolve_chat_template(std::nullopt, text);
  } catch (const tessera::Error&) {
  }
  // Message contents and roles come from the input, split on NUL bytes.
  std::vector<tessera::ChatMessage> messages;
  const char* roles[] = {"system", "user", "assistant", "tool"};
  size_t start = 0;
  for (size_t i = 0; i <= size && messages.size() < 8; ++i) {
    if (i == size || data[i] == 0) {
      messages.push_back({roles[(i * 31 + messages.size()) % 4], std::string(text.substr(start, i - start))});
      start = i + 1;
    }
  }
  for (auto name : tessera::chat_template_names()) {
    const auto kind = tessera::chat_template_from_name(name);
    try {
      (void)tessera::apply_chat_template(*kind, messages, size % 2 == 0, "<s>", "</s>");
    } catch (const tessera::Error&) {
    }
  }
  return 0;
}
