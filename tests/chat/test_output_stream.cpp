// OutputStream: the deltas of a stream add up to the final parse, however the text is split (every byte boundary,
// byte by byte); call deltas have OpenAI's shape (the first carries the name, the rest argument pieces).
#include <gtest/gtest.h>

#include "chat/recorded_outputs.h"
#include "chat/stream.h"

namespace tessera::test {
namespace {

using chat::OutputDelta;
using chat::OutputStream;
using chat::ParsedOutput;

void apply(ParsedOutput& acc, const OutputDelta& d) {
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

void expect_same(const ParsedOutput& a, const ParsedOutput& b) {
  EXPECT_EQ(a.reasoning, b.reasoning);
  EXPECT_EQ(a.content, b.content);
  ASSERT_EQ(a.calls.size(), b.calls.size());
  for (size_t i = 0; i < a.calls.size(); ++i) {
    EXPECT_EQ(a.calls[i].name, b.calls[i].name);
    EXPECT_EQ(a.calls[i].arguments, b.calls[i].arguments);
  }
}

ParsedOutput streamed(const Recorded& r, const std::vector<std::string_view>& pieces) {
  OutputStream s(r.format);
  ParsedOutput acc;
  for (auto p : pieces) apply(acc, s.push(p));
  apply(acc, s.finish());
  return acc;
}

TEST(ChatOutputStream, EveryTwoWaySplitGivesTheFinalParse) {
  for (const auto& r : recorded_outputs()) {
    SCOPED_TRACE(r.label);
    const auto whole = chat::parse_output(r.text, r.format, true);
    const std::string_view t = r.text;
    for (size_t k = 0; k <= t.size(); ++k) {
      SCOPED_TRACE(k);
      expect_same(streamed(r, {t.substr(0, k), t.substr(k)}), whole);
      if (HasFailure()) return;
    }
  }
}

TEST(ChatOutputStream, ByteByByteGivesTheFinalParse) {
  for (const auto& r : recorded_outputs()) {
    SCOPED_TRACE(r.label);
    std::vector<std::string_view> bytes;
    for (size_t k = 0; k < r.text.size(); ++k) bytes.push_back(std::string_view(r.text).substr(k, 1));
    expect_same(streamed(r, bytes), chat::parse_output(r.text, r.format, true));
  }
}

TEST(ChatOutputStream, ArgumentsArriveInPiecesAfterTheName) {
  const auto all = recorded_outputs();
  const Recorded& hermes = all.front();
  OutputStream s(hermes.format);
  size_t headers = 0, pieces = 0;
  for (char c : hermes.text) {
    const auto d = s.push(std::string_view(&c, 1));
    EXPECT_EQ(d.content, "");  // nothing of the call leaks as content
    for (const auto& call : d.calls) (call.first ? headers : pieces)++;
  }
  s.finish();
  EXPECT_EQ(headers, 1u);
  EXPECT_GT(pieces, 5u);
}

}  // namespace
}  // namespace tessera::test
