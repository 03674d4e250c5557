// The grammar text form: what it accepts (checked through the matcher) and the errors it names by line and column.
#include <gtest/gtest.h>

#include "grammar/matcher.h"
#include "grammar/parser.h"
#include "util/error.h"

namespace tessera::grammar {
namespace {

bool matches(const std::string& grammar, const std::string& text) {
  Matcher m(std::make_shared<Grammar>(parse_grammar(grammar)));
  return m.advance(text) && m.can_end();
}

std::string error_of(const std::string& grammar) {
  try {
    parse_grammar(grammar);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(GrammarParser, LiteralsClassesAndAlternatives) {
  const std::string g = "root ::= \"ab\" | [x-z]+ | \"q\" [^a-y]\n";
  EXPECT_TRUE(matches(g, "ab"));
  EXPECT_TRUE(matches(g, "xyzzy"));
  EXPECT_TRUE(matches(g, "qz"));
  EXPECT_TRUE(matches(g, "q!"));
  EXPECT_FALSE(matches(g, "qa"));
  EXPECT_FALSE(matches(g, "a"));
  EXPECT_FALSE(matches(g, ""));
  EXPECT_FALSE(matches(g, "abx"));
}

TEST(GrammarParser, Repetition) {
  const std::string g = "root ::= \"a\"{2,4} \"b\"? (\"c\" \"d\")* [0-9]{3} \"e\"{2,}\n";
  EXPECT_TRUE(matches(g, "aa123ee"));
  EXPECT_TRUE(matches(g, "aaaabcdcd000eeee"));
  EXPECT_FALSE(matches(g, "a123ee"));
  EXPECT_FALSE(matches(g, "aaaaa123ee"));
  EXPECT_FALSE(matches(g, "aa12ee"));
  EXPECT_FALSE(matches(g, "aa123e"));
  EXPECT_FALSE(matches(g, "aabb123ee"));
  EXPECT_FALSE(matches(g, "aacdc123ee"));
}

TEST(GrammarParser, RulesAcrossLinesCommentsAndEscapes) {
  const std::string g =
      "# a comment\n"
      "root ::= item\n"
      "  (\",\" item)*   # list\n"
      "item ::= \"\\x41\" | \"\\n\" | \"\\u00e9\" | [\\]\\-]\n";
  EXPECT_TRUE(matches(g, "A,\n,\xc3\xa9,],-"));
  EXPECT_FALSE(matches(g, "A,"));
  EXPECT_FALSE(matches(g, "\xc3"));
}

TEST(GrammarParser, AnyByteAndEmptyAlternative) {
  const std::string g = "root ::= \"<\" . \">\" x\nx ::= | \"!\"\n";
  EXPECT_TRUE(matches(g, "<\xff>"));
  EXPECT_TRUE(matches(g, "<a>!"));
  EXPECT_FALSE(matches(g, "<>"));
}

TEST(GrammarParser, RecursionNests) {
  const std::string g = "root ::= \"(\" root \")\" | \"x\"\n";
  EXPECT_TRUE(matches(g, "((((x))))"));
  EXPECT_FALSE(matches(g, "((x)"));
}

TEST(GrammarParser, ErrorsNameLineAndColumn) {
  EXPECT_EQ(error_of("root ::= \"a\"\nfoo ::= \"b\" @\n"), "grammar line 2, column 13: unexpected character '@'");
  EXPECT_NE(error_of("root ::= \"abc\n").find("line 1, column 14"), std::string::npos) << error_of("root ::= \"abc\n");
  EXPECT_EQ(error_of("root ::= [ab"), "grammar line 1, column 10: unterminated class");
  EXPECT_NE(error_of("root := \"a\"").find("expected '::='"), std::string::npos);
  EXPECT_NE(error_of("root ::= (\"a\"").find("unclosed '('"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"a\"{3,1}").find("below its minimum"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"\\q\"").find("unknown escape"), std::string::npos);
  EXPECT_NE(error_of("root ::= [\xc3\xa9]").find("single bytes"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"a\"\nroot ::= \"b\"").find("line 2, column 1: rule 'root' is defined twice"),
            std::string::npos);
}

TEST(GrammarParser, ValidationErrors) {
  EXPECT_NE(error_of("root ::= missing").find("rule 'missing' is used but never defined"), std::string::npos);
  EXPECT_NE(error_of("start ::= \"a\"").find("no rule 'root'"), std::string::npos);
  EXPECT_NE(error_of("root ::= root \"a\" | \"b\"").find("left-recursive"), std::string::npos);
  EXPECT_NE(error_of("root ::= x root\nx ::= \"a\"?").find("left-recursive"), std::string::npos);
  EXPECT_NE(error_of("root ::= (x)*\nx ::= \"a\"?").find("left-recursive"), std::string::npos);
  EXPECT_EQ(error_of("root ::= x root | \"b\"\nx ::= \"a\""), "");
}

TEST(GrammarParser, LongBoundedRepetitionStaysShallow) {
  Matcher m(std::make_shared<Grammar>(parse_grammar("root ::= \"a\"{0,5000} \"b\"")));
  ASSERT_TRUE(m.advance(std::string(4999, 'a')));
  EXPECT_TRUE(m.advance('a'));
  EXPECT_FALSE(m.advance('a'));
  EXPECT_TRUE(m.advance('b'));
  EXPECT_TRUE(m.can_end());
  EXPECT_TRUE(m.finished());
}

}  // namespace
}  // namespace tessera::grammar
