// Chat output streamed through chat::OutputStream with its deltas added up; call deltas must have OpenAI's shape
// (the first names the call and carries no arguments, the rest carry argument pieces and no name).
#pragma once

#include <gtest/gtest.h>

#include <string_view>
#include <vector>

#include "chat/stream.h"

namespace tessera::test {

inline void apply_delta(chat::ParsedOutput& acc, const chat::OutputDelta& d) {
  acc.reasoning += d.reasoning;
  acc.content += d.content;
  for (const auto& c : d.calls) {
    if (c.first) {
      ASSERT_EQ(c.index, acc.calls.size());
      ASSERT_TRUE(c.arguments.empty());
      acc.calls.push_back({c.name, ""});
    } else {
      ASSERT_LT(c.index, acc.calls.size());
      ASSERT_TRUE(c.name.empty());
      acc.calls[c.index].arguments += c.arguments;
    }
  }
}

// The deltas of `pieces` pushed in order, then of finish(), added up.
inline chat::ParsedOutput streamed(const chat::OutputFormat& f, const std::vector<std::string_view>& pieces) {
  chat::OutputStream s(f);
  chat::ParsedOutput acc;
  for (auto p : pieces) apply_delta(acc, s.push(p));
  apply_delta(acc, s.finish());
  return acc;
}

// `text` streamed byte by byte.
inline chat::ParsedOutput streamed_bytes(const chat::OutputFormat& f, std::string_view text) {
  std::vector<std::string_view> bytes;
  for (size_t k = 0; k < text.size(); ++k) bytes.push_back(text.substr(k, 1));
  return streamed(f, bytes);
}

}  // namespace tessera::test
