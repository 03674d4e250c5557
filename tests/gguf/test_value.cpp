// Metadata values and the key/value table: checked conversions, getter error messages, rendering.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>

#include "gguf/gguf_value.h"
#include "support/error_text.h"
#include "util/error.h"

namespace tessera::gguf {
namespace {

using ::testing::HasSubstr;

using test::error_of;

TEST(GgufValue, ConstructorsPickTheGgufType) {
  EXPECT_EQ(Value(uint8_t{1}).type(), ValueType::UINT8);
  EXPECT_EQ(Value(int8_t{1}).type(), ValueType::INT8);
  EXPECT_EQ(Value(uint16_t{1}).type(), ValueType::UINT16);
  EXPECT_EQ(Value(int16_t{1}).type(), ValueType::INT16);
  EXPECT_EQ(Value(1u).type(), ValueType::UINT32);
  EXPECT_EQ(Value(1).type(), ValueType::INT32);
  EXPECT_EQ(Value(1.0f).type(), ValueType::FLOAT32);
  EXPECT_EQ(Value(true).type(), ValueType::BOOL);
  EXPECT_EQ(Value("s").type(), ValueType::STRING);
  EXPECT_EQ(Value(std::string("s")).type(), ValueType::STRING);
  EXPECT_EQ(Value(uint64_t{1}).type(), ValueType::UINT64);
  EXPECT_EQ(Value(int64_t{1}).type(), ValueType::INT64);
  EXPECT_EQ(Value(1.0).type(), ValueType::FLOAT64);
  EXPECT_EQ(value_type_name(ValueType::FLOAT32), "float32");
  EXPECT_EQ(value_type_name(static_cast<ValueType>(99)), "unknown");
}

TEST(GgufValue, ArraysKnowTheirElementType) {
  Value inferred(std::vector<Value>{Value(1u), Value(2u)});
  EXPECT_EQ(inferred.type(), ValueType::ARRAY);
  EXPECT_EQ(inferred.array_type(), ValueType::UINT32);
  EXPECT_EQ(inferred, Value::array(ValueType::UINT32, {Value(1u), Value(2u)}));

  Value empty = Value::array(ValueType::STRING, {});
  EXPECT_EQ(empty.array_type(), ValueType::STRING);
  EXPECT_TRUE(empty.to_array("x").empty());
  EXPECT_NE(empty, Value::array(ValueType::INT32, {}));  // the element type is part of the value

  EXPECT_THAT(error_of([] {
                Value::array(ValueType::UINT32, {Value(1u), Value("two")});
              }),
              HasSubstr("array element 1 has type string, but the array holds uint32"));
}

TEST(GgufValue, IntegerConversionsAreChecked) {
  EXPECT_EQ(Value(uint8_t{200}).to_u64("v"), 200u);
  EXPECT_EQ(Value(int16_t{7}).to_u64("v"), 7u);
  EXPECT_EQ(Value(std::numeric_limits<uint64_t>::max()).to_u64("v"), std::numeric_limits<uint64_t>::max());
  EXPECT_THAT(error_of([] { Value(int32_t{-1}).to_u64("the count"); }),
              HasSubstr("the count has the negative value -1, expected an unsigned integer"));
  EXPECT_THAT(error_of([] { Value(1.5f).to_u64("v"); }), HasSubstr("v has type float32, expected an unsigned integer"));
  EXPECT_THAT(error_of([] { Value(true).to_u64("v"); }), HasSubstr("has type bool"));

  EXPECT_EQ(Value(int8_t{-5}).to_i64("v"), -5);
  EXPECT_EQ(Value(uint32_t{4000000000u}).to_i64("v"), 4000000000);
  EXPECT_EQ(Value(uint64_t{1} << 62).to_i64("v"), int64_t{1} << 62);
  EXPECT_THAT(error_of([] { Value(std::numeric_limits<uint64_t>::max()).to_i64("v"); }),
              HasSubstr("18446744073709551615, which does not fit a signed 64-bit integer"));
  EXPECT_THAT(error_of([] { Value("x").to_i64("v"); }), HasSubstr("has type string, expected an integer"));
}

TEST(GgufValue, OtherConversions) {
  EXPECT_DOUBLE_EQ(Value(1.5f).to_f64("v"), 1.5);
  EXPECT_DOUBLE_EQ(Value(int64_t{-3}).to_f64("v"), -3.0);
  EXPECT_DOUBLE_EQ(Value(uint8_t{9}).to_f64("v"), 9.0);
  EXPECT_THAT(error_of([] { Value("x").to_f64("v"); }), HasSubstr("v has type string, expected a number"));
  EXPECT_THAT(error_of([] { Value(false).to_f64("v"); }), HasSubstr("has type bool, expected a number"));
  EXPECT_TRUE(Value(true).to_bool("v"));
  EXPECT_THAT(error_of([] { Value(1).to_bool("v"); }), HasSubstr("v has type int32, expected a bool"));
  EXPECT_EQ(Value("abc").to_string("v"), "abc");
  EXPECT_THAT(error_of([] { Value::array(ValueType::STRING, {}).to_string("v"); }),
              HasSubstr("v has type array of string, expected a string"));
  EXPECT_THAT(error_of([] { Value(1u).to_array("v"); }), HasSubstr("expected an array"));
  EXPECT_TRUE(Value(1).is_integer());
  EXPECT_FALSE(Value(1.0).is_integer());
  EXPECT_TRUE(Value(1.0).is_number());
  EXPECT_FALSE(Value(true).is_number());
}

TEST(GgufValue, Describe) {
  EXPECT_EQ(Value(uint8_t{65}).describe(), "65");
  EXPECT_EQ(Value(int8_t{-2}).describe(), "-2");
  EXPECT_EQ(Value(1e-05f).describe(), "1e-05");
  EXPECT_EQ(Value(true).describe(), "true");
  EXPECT_EQ(Value("a\"b\n\x01").describe(), "\"a\\\"b\\n\\x01\"");
  Value arr = Value::array(ValueType::INT32, {Value(1), Value(2), Value(3), Value(4), Value(5)});
  EXPECT_EQ(arr.describe(), "[int32 x 5] [1, 2, 3, 4, ...]");
  EXPECT_EQ(arr.describe(10), "[int32 x 5] [1, 2, 3, 4, 5]");
  EXPECT_EQ(Value::array(ValueType::STRING, {}).describe(), "[string x 0] []");
  Value nested = Value::array(ValueType::ARRAY, {Value::array(ValueType::STRING, {Value("x")})});
  EXPECT_EQ(nested.describe(), "[array x 1] [[string x 1] [\"x\"]]");
  std::string long_text(500, 'a');
  std::string d = Value(long_text).describe();
  EXPECT_LT(d.size(), 200u);
  EXPECT_THAT(d, HasSubstr("(500 bytes)"));
  // A cut never splits a UTF-8 sequence: 119 ASCII bytes then a 2-byte character straddling the limit.
  std::string utf8 = std::string(119, 'b') + "\xc3\xa9" + std::string(100, 'c');
  EXPECT_THAT(Value(utf8).describe(), HasSubstr(std::string(119, 'b') + "\"..."));
}

TEST(GgufMetadata, KeepsInsertionOrderAndReplacesInPlace) {
  Metadata m;
  m.set("b", Value(1u));
  m.set("a", Value("x"));
  m.set("b", Value(2u));
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m.entries()[0].first, "b");
  EXPECT_EQ(m.entries()[0].second, Value(2u));
  EXPECT_EQ(m.entries()[1].first, "a");
  EXPECT_TRUE(m.contains("a"));
  EXPECT_FALSE(m.contains("c"));
  EXPECT_EQ(m.find("c"), nullptr);
}

TEST(GgufMetadata, GettersNameTheKey) {
  Metadata m;
  m.set("llama.block_count", Value("five"));
  m.set("llama.context_length", Value(2048u));
  m.set("eps", Value(1e-5f));
  m.set("flag", Value(true));
  m.set("neg", Value(int32_t{-1}));
  m.set("list", Value::array(ValueType::INT32, {Value(1)}));

  EXPECT_THAT(error_of([&] { m.get_u64("llama.block_count"); }),
              HasSubstr("metadata key 'llama.block_count' has type string, expected an unsigned integer"));
  EXPECT_THAT(error_of([&] { m.get_u64("llama.missing"); }), HasSubstr("metadata key 'llama.missing' is missing"));
  EXPECT_THAT(error_of([&] { m.get_u64("neg"); }), HasSubstr("metadata key 'neg' has the negative value -1"));
  EXPECT_THAT(error_of([&] { m.get_string("llama.context_length"); }),
              HasSubstr("metadata key 'llama.context_length' has type uint32, expected a string"));
  EXPECT_THAT(error_of([&] { m.get_bool("eps"); }), HasSubstr("metadata key 'eps' has type float32, expected a bool"));
  EXPECT_THAT(error_of([&] { m.get_array("flag"); }),
              HasSubstr("metadata key 'flag' has type bool, expected an array"));
  EXPECT_THAT(error_of([&] { m.get_f64("list"); }),
              HasSubstr("metadata key 'list' has type array of int32, expected a number"));
  EXPECT_THAT(error_of([&] { m.get_i64("nothing"); }), HasSubstr("metadata key 'nothing' is missing"));

  EXPECT_EQ(m.get_u64("llama.context_length"), 2048u);
  EXPECT_EQ(m.get_i64("neg"), -1);
  EXPECT_FLOAT_EQ(static_cast<float>(m.get_f64("eps")), 1e-5f);
  EXPECT_TRUE(m.get_bool("flag"));
  EXPECT_EQ(m.get_string("llama.block_count"), "five");
  EXPECT_EQ(m.get_array("list").size(), 1u);

  EXPECT_EQ(m.opt_u64("absent"), std::nullopt);
  EXPECT_EQ(m.opt_u64("llama.context_length"), 2048u);
  EXPECT_EQ(m.opt_f64("absent"), std::nullopt);
  EXPECT_EQ(m.opt_f64("llama.context_length"), 2048.0);
  EXPECT_EQ(m.opt_bool("absent"), std::nullopt);
  EXPECT_EQ(m.opt_bool("flag"), true);
  EXPECT_EQ(m.opt_string("absent"), std::nullopt);
  EXPECT_EQ(m.opt_string("llama.block_count"), "five");
  EXPECT_THAT(error_of([&] { m.opt_u64("llama.block_count"); }),
              HasSubstr("metadata key 'llama.block_count' has type string, expected an unsigned integer"));
  EXPECT_THAT(error_of([&] { m.opt_string("flag"); }), HasSubstr("metadata key 'flag' has type bool"));
  EXPECT_THAT(error_of([&] { m.opt_bool("eps"); }), HasSubstr("metadata key 'eps' has type float32"));
  EXPECT_THAT(error_of([&] { m.opt_f64("flag"); }), HasSubstr("metadata key 'flag' has type bool"));
}

}  // namespace
}  // namespace tessera::gguf
