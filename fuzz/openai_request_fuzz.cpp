// libFuzzer target for the OpenAI request parser: any body must either parse or be refused with an ApiError,
// and whatever parses must survive sampler merging and the response builders.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "server/openai_api.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tessera::server;
  if (size == 0) return 0;
  // The first byte picks the endpoint; the rest is the body.
  const Endpoint endpoint = data[0] & 1 ? Endpoint::Completion : Endpoint::Chat;
  const std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);
  try {
    const CompletionRequest r = parse_completion_request(body, endpoint);
    const tessera::SamplerParams p = merge_sampler(r, tessera::SamplerParams{});
    (void)p;
    const ResponseMeta meta{"id", 0, r.model};
    std::string text;
    for (const auto& m : r.messages) text += m.content;
    text += r.prompt;
    (void)dump(chat_response_json(meta, text, "stop", {1, 2}, nullptr));
    (void)dump(completion_chunk_json(meta, text, "", nullptr));
  } catch (const ApiError& e) {
    if (e.status() < 400 || e.status() > 599) __builtin_trap();
    (void)dump(error_json(e));
  }
  return 0;
}
