// The JSON-schema compiler: generated documents (random walks of the grammar) parse and validate; documents
// outside the schema are rejected by the matcher; unsupported or bad schemas fail naming where.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>

#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "grammar/parser.h"
#include "grammar/random_walk.h"
#include "support/json_validate.h"
#include "util/error.h"

namespace tessera::grammar {
namespace {

using nlohmann::json;

std::shared_ptr<const Grammar> compile(const std::string& schema) {
  return std::make_shared<Grammar>(parse_grammar(json_schema_grammar(schema)));
}

bool accepts(const std::shared_ptr<const Grammar>& g, const std::string& text) {
  Matcher m(g);
  return m.advance(text) && m.can_end();
}

std::string error_of(const std::string& schema) {
  try {
    compile(schema);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

void expect_random_documents_valid(const std::string& schema_text, int n) {
  const auto g = compile(schema_text);
  const json schema = json::parse(schema_text);
  std::mt19937 rng(7);
  int made = 0;
  for (int i = 0; i < n * 4 && made < n; ++i) {
    std::string doc;
    if (!test::random_sentence(g, rng, doc)) continue;
    ++made;
    json parsed;
    ASSERT_NO_THROW(parsed = json::parse(doc)) << doc;
    EXPECT_EQ(test::json_invalid(parsed, schema, schema), "") << doc;
  }
  EXPECT_GE(made, n / 2);
}

TEST(JsonSchema, TestSchemaAcceptsAndRejects) {
  const auto g = compile(test::kTestSchema);
  EXPECT_TRUE(accepts(g, R"({"name":"Rex","kind":"dog","owner":{"verified":true},"scores":[{"v":false}]})"));
  EXPECT_TRUE(accepts(g, R"({ "name": "", "kind": "cat", "age": -12,
    "owner": {"verified": false, "tags": ["a", 3, null]}, "scores": [{"v": true, "w": "x"}, {"v": false}] })"));
  // Missing required, wrong enum, extra property, too many items, wrong order of a required one, bad types.
  EXPECT_FALSE(accepts(g, R"({"name":"Rex","kind":"dog","scores":[{"v":false}]})"));
  EXPECT_FALSE(accepts(g, R"({"name":"Rex","kind":"cow","owner":{"verified":true},"scores":[{"v":false}]})"));
  EXPECT_FALSE(accepts(g, R"({"name":"Rex","kind":"dog","x":1,"owner":{"verified":true},"scores":[{"v":false}]})"));
  EXPECT_FALSE(accepts(g, R"({"name":"Rex","kind":"dog","owner":{"verified":true},"scores":[]})"));
  EXPECT_FALSE(accepts(
      g, R"({"name":"Rex","kind":"dog","owner":{"verified":true},"scores":[{"v":true},{"v":true},{"v":true}]})"));
  EXPECT_FALSE(accepts(g, R"({"name":"Rex","kind":"dog","age":1.5,"owner":{"verified":true},"scores":[{"v":false}]})"));
  EXPECT_FALSE(accepts(g, R"({"name":"abcdefghijklm","kind":"dog","owner":{"verified":true},"scores":[{"v":false}]})"));
  EXPECT_FALSE(accepts(g, R"({"name":"Rex","kind":"dog","owner":{"verified":true},"scores":[{"v":false}]} x)"));
}

TEST(JsonSchema, RandomDocumentsValidate) {
  expect_random_documents_valid(test::kTestSchema, 200);
  expect_random_documents_valid(R"({"type":"array","items":{"type":["number","string","null"]},"maxItems":5})", 100);
  expect_random_documents_valid(
      R"({"anyOf":[{"type":"boolean"},{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]}]})",
      100);
  expect_random_documents_valid(R"({"type":"object","additionalProperties":{"type":"integer"}})", 100);
  expect_random_documents_valid(R"({"type":"string","minLength":2,"maxLength":3})", 100);
}

TEST(JsonSchema, RecursiveReference) {
  const std::string schema = R"({"$ref":"#/definitions/node","definitions":{"node":{"type":"object",
    "properties":{"v":{"type":"integer"},"kids":{"type":"array","items":{"$ref":"#/definitions/node"}}},
    "required":["v"]}}})";
  const auto g = compile(schema);
  EXPECT_TRUE(accepts(g, R"({"v":1,"kids":[{"v":2},{"v":3,"kids":[{"v":4,"kids":[]}]}]})"));
  EXPECT_FALSE(accepts(g, R"({"v":1,"kids":[{"kids":[]}]})"));
  expect_random_documents_valid(schema, 100);
}

TEST(JsonSchema, AnyJsonObject) {
  const auto g = std::make_shared<Grammar>(parse_grammar(json_object_grammar()));
  for (const char* ok : {"{}", R"({"a":[1,2.5e-3,true,null,{"b":"\u00e9\n"}]})", "{ \"x\" : \"caf\xc3\xa9\" }"}) {
    EXPECT_TRUE(accepts(g, ok)) << ok;
  }
  // A \u escape of a UTF-16 surrogate: strict parsers (nlohmann's among them) refuse a lone one.
  for (const char* bad : {"[]", "{", R"({"a":01})", R"({"a":"\x"})", R"({"a":"\udafc"})", R"({"a":"\uD800"})",
                          "{\"a\":\"\xc3\"}", R"({"a":1,})", "{'a':1}", "{\"a\":\"\x01\"}"}) {
    EXPECT_FALSE(accepts(g, bad)) << bad;
  }
  std::mt19937 rng(3);
  for (int i = 0; i < 200; ++i) {
    std::string doc;
    if (!test::random_sentence(g, rng, doc)) continue;
    EXPECT_TRUE(json::accept(doc)) << doc;
  }
}

TEST(JsonSchema, BadSchemasNameWhere) {
  EXPECT_NE(error_of("{").find("not valid JSON"), std::string::npos);
  EXPECT_NE(error_of(R"({"type":"strng"})").find("at '/type': unknown type 'strng'"), std::string::npos);
  EXPECT_NE(error_of(R"({"properties":{"a":{"type":"string","pattern":"x+"}}})")
                .find("at '/properties/a': unsupported keyword 'pattern'"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"type":"object","properties":{},"required":["a"]})").find("'a' is not in properties"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"$ref":"#/$defs/nope"})").find("names nothing"), std::string::npos);
  EXPECT_NE(error_of(R"({"$ref":"http://x/y"})").find("within the document"), std::string::npos);
  EXPECT_NE(error_of(R"({"type":"array","minItems":3,"maxItems":2})").find("maxItems is below"), std::string::npos);
  EXPECT_NE(error_of(R"({"enum":[]})").find("non-empty"), std::string::npos);
}

}  // namespace
}  // namespace tessera::grammar
