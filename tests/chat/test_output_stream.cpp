// OutputStream: the deltas of a stream add up to the final parse, however the text is split (every byte boundary,
// byte by byte); call deltas have OpenAI's shape (the first carries the name, the rest argument pieces).
#include <gtest/gtest.h>

#include "chat/recorded_outputs.h"
#include "chat/stream.h"
#include "chat/streamed_output.h"

namespace tessera::test {
namespace {

using chat::OutputStream;
using chat::ParsedOutput;

void expect_same(const ParsedOutput& a, const ParsedOutput& b) {
  EXPECT_EQ(a.reasoning, b.reasoning);
  EXPECT_EQ(a.content, b.content);
  ASSERT_EQ(a.calls.size(), b.calls.size());
  for (size_t i = 0; i < a.calls.size(); ++i) {
    EXPECT_EQ(a.calls[i].name, b.calls[i].name);
    EXPECT_EQ(a.calls[i].arguments, b.calls[i].arguments);
  }
}

TEST(ChatOutputStream, EveryTwoWaySplitGivesTheFinalParse) {
  for (const auto& r : recorded_outputs()) {
    SCOPED_TRACE(r.label);
    const auto whole = chat::parse_output(r.text, r.format, true);
    const std::string_view t = r.text;
    for (size_t k = 0; k <= t.size(); ++k) {
      SCOPED_TRACE(k);
      expect_same(streamed(r.format, {t.substr(0, k), t.substr(k)}), whole);
      if (HasFailure()) return;
    }
  }
}

TEST(ChatOutputStream, ByteByByteGivesTheFinalParse) {
  for (const auto& r : recorded_outputs()) {
    SCOPED_TRACE(r.label);
    expect_same(streamed_bytes(r.format, r.text), chat::parse_output(r.text, r.format, true));
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
