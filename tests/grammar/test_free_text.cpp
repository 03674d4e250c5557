// Free text before a closing tag (grammar/free_text.h): accepted exactly when the tag first occurs where it closes
// the text, for tags that overlap themselves too; valid UTF-8 only; the same verdicts whatever way the bytes are
// split into tokens (a mask over a small vocabulary equals a check of every token); random sentences stay in the
// language; counted characters never start the tag.
#include <gtest/gtest.h>

#include <random>

#include "grammar/free_text.h"
#include "grammar/matcher.h"
#include "grammar/parser.h"
#include "grammar/random_walk.h"
#include "grammar/token_trie.h"
#include "util/error.h"

namespace tessera::grammar {
namespace {

std::shared_ptr<const Grammar> until(std::string_view lead, std::string_view stop) {
  return std::make_shared<Grammar>(parse_grammar("root ::= v \"#\"\n" + text_until_rules("v", lead, stop)));
}

bool accepts(const std::shared_ptr<const Grammar>& g, std::string_view text) {
  Matcher m(g);
  return m.advance(text) && m.can_end();
}

// The language by definition: text + lead + stop holds stop first at its end, then "#".
bool in_language(std::string_view s, std::string_view lead, std::string_view stop) {
  if (s.empty() || s.back() != '#') return false;
  const std::string_view body = s.substr(0, s.size() - 1);
  const std::string tail = std::string(lead) + std::string(stop);
  if (!body.ends_with(tail)) return false;
  return body.find(stop) == body.size() - stop.size();
}

TEST(FreeText, TextEndsAtTheFirstClosingTag) {
  const auto g = until("\n", "</parameter>");
  EXPECT_TRUE(accepts(g, "\n</parameter>#"));
  EXPECT_TRUE(accepts(g, "a < b && c </param> d\n</parameter>#"));
  EXPECT_TRUE(accepts(g, "</parameter\n</parameter>#"));
  EXPECT_TRUE(accepts(g, "x <</parameter\n\n</parameter>#"));
  EXPECT_FALSE(accepts(g, "a</parameter>b\n</parameter>#"));
  EXPECT_FALSE(accepts(g, "a</parameter>\n</parameter>#"));
  EXPECT_FALSE(accepts(g, "a</parameter>#"));  // the lead is missing
  // Valid UTF-8 only, no control bytes but tabs and line breaks.
  EXPECT_TRUE(accepts(g, "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\t\r\n\n</parameter>#"));
  EXPECT_FALSE(accepts(g, "\xc3\n</parameter>#"));
  EXPECT_FALSE(accepts(g, "\xed\xa0\x80\n</parameter>#"));
  EXPECT_FALSE(accepts(g, "\x01\n</parameter>#"));
  // A lead that holds the tag leaves no text possible.
  EXPECT_THROW(text_until_rules("v", "</p>", "</p>"), Error);
  EXPECT_THROW(text_until_rules("v", "", ""), Error);
}

TEST(FreeText, SelfOverlappingTagsMatchTheDefinitionOnEveryShortString) {
  // Every string over a small alphabet up to length 7, against the definition.
  for (const auto& [lead, stop] : std::vector<std::pair<std::string, std::string>>{
           {"", "aab"}, {"", "abab"}, {"a", "ab"}, {"", "aaa"}, {"b", "aba"}}) {
    SCOPED_TRACE(lead + "|" + stop);
    const auto g = until(lead, stop);
    std::string s;
    for (int len = 0; len <= 7; ++len) {
      for (int code = 0; code < (1 << (2 * len)); ++code) {
        s.clear();
        for (int i = 0; i < len; ++i) s += "ab#"[std::min((code >> (2 * i)) & 3, 2)];
        s += lead + stop + "#";
        EXPECT_EQ(accepts(g, s), in_language(s, lead, stop)) << s;
      }
    }
  }
}

TEST(FreeText, RandomSentencesStayInTheLanguage) {
  const auto g = until("\n", "</parameter>");
  std::mt19937 rng(11);
  int done = 0;
  for (int i = 0; i < 300; ++i) {
    std::string out;
    if (!test::random_sentence(g, rng, out, {"\n</parameter>#", "</parameter", "<"})) continue;
    ++done;
    EXPECT_TRUE(in_language(out, "\n", "</parameter>")) << out;
  }
  EXPECT_GT(done, 250);
}

TEST(FreeText, TokenMasksAgreeWithEveryTokenAcrossBoundaries) {
  // Tokens that cut the tag anywhere: the mask must equal trying each token's bytes on the matcher.
  const std::vector<std::string> pieces = {"",
                                           "a",
                                           " ",
                                           "\n",
                                           "<",
                                           "</",
                                           "</par",
                                           "ameter",
                                           "ameter>",
                                           ">",
                                           "</parameter>",
                                           "\n</parameter>",
                                           "x</parameter>#",
                                           "#",
                                           "param",
                                           "\xc3",
                                           "\xa9",
                                           "\xc3\xa9",
                                           "e>\n<"};
  const auto trie = std::make_shared<TokenTrie>(std::span<const std::string>(pieces), std::vector<int32_t>{0});
  const auto g = until("\n", "</parameter>");
  std::mt19937 rng(5);
  for (int walk = 0; walk < 40; ++walk) {
    Matcher m(g);
    std::string text;
    for (int step = 0; step < 30; ++step) {
      std::vector<uint64_t> words((pieces.size() + 63) / 64, 0);
      m.allowed_tokens(*trie, words);
      std::vector<int32_t> allowed;
      for (size_t t = 1; t < pieces.size(); ++t) {
        const bool masked = (words[t / 64] >> (t % 64)) & 1;
        EXPECT_EQ(masked, m.allows(pieces[t])) << text << " + " << pieces[t];
        if (masked) allowed.push_back(static_cast<int32_t>(t));
      }
      EXPECT_EQ(static_cast<bool>(words[0] & 1), m.can_end()) << text;
      if (allowed.empty()) break;
      const int32_t pick = allowed[std::uniform_int_distribution<size_t>(0, allowed.size() - 1)(rng)];
      ASSERT_TRUE(m.advance(pieces[static_cast<size_t>(pick)]));
      text += pieces[static_cast<size_t>(pick)];
      if (m.finished()) break;
    }
    if (m.can_end()) {
      EXPECT_TRUE(in_language(text, "\n", "</parameter>")) << text;
    }
  }
}

TEST(FreeText, CountedCharactersLeaveOutTheTagsFirstByte) {
  const auto g = std::make_shared<Grammar>(parse_grammar("root ::= c{0,3}\n" + text_char_rule("c", '<')));
  EXPECT_TRUE(accepts(g, "a\xc3\xa9\n"));
  EXPECT_TRUE(accepts(g, "\xf0\x9f\x98\x80>"));
  EXPECT_FALSE(accepts(g, "a<"));
  EXPECT_FALSE(accepts(g, "abcd"));
  EXPECT_FALSE(accepts(g, "\xc3"));
}

}  // namespace
}  // namespace tessera::grammar
