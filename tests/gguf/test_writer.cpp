// GGUF writer: round trips through the reader, byte-identical rewrites of real files, v2, and errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "support/error_text.h"
#include "support/test_paths.h"
#include "util/error.h"

namespace tessera::gguf {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

using test::error_of;

std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(seed + i * 7);
  return v;
}

// Every value type, nested and empty arrays, and strings that are not UTF-8 or hold NUL bytes.
Metadata all_value_types() {
  Metadata m;
  m.set("general.architecture", Value("llama"));
  m.set("t.u8", Value(uint8_t{255}));
  m.set("t.i8", Value(int8_t{-128}));
  m.set("t.u16", Value(uint16_t{65535}));
  m.set("t.i16", Value(int16_t{-32768}));
  m.set("t.u32", Value(uint32_t{4294967295u}));
  m.set("t.i32", Value(int32_t{-2147483647 - 1}));
  m.set("t.f32", Value(3.25f));
  m.set("t.bool_true", Value(true));
  m.set("t.bool_false", Value(false));
  m.set("t.string", Value("hello, world"));
  m.set("t.string_empty", Value(""));
  m.set("t.string_binary", Value(std::string("\xff\xfe\0\x01 not utf-8", 16)));
  m.set("t.u64", Value(std::numeric_limits<uint64_t>::max()));
  m.set("t.i64", Value(std::numeric_limits<int64_t>::min()));
  m.set("t.f64", Value(-1.0e300));
  m.set("t.arr_u8", Value::array(ValueType::UINT8, {Value(uint8_t{1}), Value(uint8_t{2})}));
  m.set("t.arr_i16", Value::array(ValueType::INT16, {Value(int16_t{-1})}));
  m.set("t.arr_u16", Value::array(ValueType::UINT16, {Value(uint16_t{9})}));
  m.set("t.arr_i8", Value::array(ValueType::INT8, {Value(int8_t{-9})}));
  m.set("t.arr_i32", Value::array(ValueType::INT32, {Value(1), Value(-2), Value(3)}));
  m.set("t.arr_u32", Value(std::vector<Value>{Value(7u), Value(8u)}));
  m.set("t.arr_f32", Value::array(ValueType::FLOAT32, {Value(0.5f), Value(-0.25f)}));
  m.set("t.arr_bool", Value::array(ValueType::BOOL, {Value(true), Value(false), Value(true)}));
  m.set("t.arr_string", Value::array(ValueType::STRING, {Value("a"), Value(""), Value("c c")}));
  m.set("t.arr_u64", Value::array(ValueType::UINT64, {Value(uint64_t{1} << 40)}));
  m.set("t.arr_i64", Value::array(ValueType::INT64, {Value(int64_t{-1} << 40)}));
  m.set("t.arr_f64", Value::array(ValueType::FLOAT64, {Value(1e-300)}));
  m.set("t.arr_empty_string", Value::array(ValueType::STRING, {}));
  m.set("t.arr_empty_f32", Value::array(ValueType::FLOAT32, {}));
  m.set("t.arr_empty_array", Value::array(ValueType::ARRAY, {}));
  m.set("t.arr_nested", Value::array(ValueType::ARRAY, {Value::array(ValueType::STRING, {Value("x"), Value("y")}),
                                                        Value::array(ValueType::STRING, {}),
                                                        Value::array(ValueType::STRING, {Value("z")})}));
  m.set("t.arr_nested_mixed",
        Value::array(ValueType::ARRAY, {Value::array(ValueType::INT32, {Value(1)}),
                                        Value::array(ValueType::ARRAY, {Value::array(ValueType::BOOL, {})})}));
  return m;
}

struct TestTensor {
  std::string name;
  GgmlType type;
  std::vector<int64_t> ne;
  std::vector<uint8_t> data;
};

std::vector<TestTensor> test_tensors() {
  return {
      {"a.f32", GgmlType::F32, {3, 2}, pattern(24, 1)},  // 24 bytes: padded to 32
      {"b.q4_0", GgmlType::Q4_0, {64, 1, 2}, pattern(2 * 2 * 18, 2)},
      {"c.f16", GgmlType::F16, {1}, pattern(2, 3)},
      {"d.q6_k", GgmlType::Q6_K, {256, 1, 1, 2}, pattern(2 * 210, 4)},
      {"e.i8", GgmlType::I8, {5}, pattern(5, 5)},
  };
}

GgufWriter make_writer(uint64_t alignment = 32) {
  GgufWriter w(alignment);
  w.metadata() = all_value_types();
  for (auto& t : test_tensors()) w.add_tensor(t.name, t.type, t.ne, t.data);
  return w;
}

void expect_matches_test_data(const GgufFile& f, uint64_t alignment) {
  EXPECT_EQ(f.alignment(), alignment);
  auto expected = test_tensors();
  ASSERT_EQ(f.tensors().size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    const TensorInfo& t = f.tensors()[i];
    SCOPED_TRACE(t.name);
    EXPECT_EQ(t.name, expected[i].name);
    EXPECT_EQ(t.type, expected[i].type);
    EXPECT_EQ(t.ne, expected[i].ne);
    EXPECT_EQ(t.offset % alignment, 0u);
    auto data = f.tensor_data(t);
    EXPECT_EQ(std::vector<uint8_t>(data.begin(), data.end()), expected[i].data);
  }
}

TEST(GgufWriter, RoundTripsEveryValueTypeAndTensors) {
  GgufWriter w = make_writer();
  auto bytes = w.to_bytes();
  GgufFile f = GgufFile::parse(bytes, "round-trip");
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.metadata(), all_value_types());
  EXPECT_EQ(f.metadata().entries().size(), all_value_types().size());
  EXPECT_EQ(f.metadata().find("t.arr_empty_string")->array_type(), ValueType::STRING);
  EXPECT_EQ(f.metadata().find("t.arr_empty_array")->array_type(), ValueType::ARRAY);
  EXPECT_EQ(f.metadata().get_string("t.string_binary").size(), 16u);
  expect_matches_test_data(f, 32);
  // Each tensor's data is padded with zeros up to the next aligned offset; the file ends aligned.
  EXPECT_EQ(bytes.size() % 32, 0u);
  const TensorInfo& a = f.tensor("a.f32");
  for (size_t i = f.data_offset() + a.n_bytes; i < f.data_offset() + 32; ++i) EXPECT_EQ(bytes[i], 0) << i;
  EXPECT_EQ(f.tensor("b.q4_0").offset, 32u);
}

TEST(GgufWriter, WritesFilesAtomically) {
  test::TempDir dir;
  auto path = dir / "model.gguf";
  GgufWriter w = make_writer();
  w.write(path);
  EXPECT_EQ(test::read_file(path), w.to_bytes());
  GgufFile f = GgufFile::open(path);
  EXPECT_EQ(f.metadata(), all_value_types());
  expect_matches_test_data(f, 32);
  // Only the file itself is left in the directory (the temporary was renamed).
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()), 1);

  // A filler that fails leaves the existing file untouched and no temporary behind.
  auto before = test::read_file(path);
  GgufWriter bad;
  bad.set("k", Value(1u));
  bad.add_tensor("t", GgmlType::F32, {4}, [](std::span<uint8_t>) { throw Error("source tensor unreadable"); });
  EXPECT_THAT(error_of([&] { bad.write(path); }), HasSubstr("source tensor unreadable"));
  EXPECT_EQ(test::read_file(path), before);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()), 1);

  EXPECT_THAT(error_of([&] { w.write(dir / "missing-dir" / "x.gguf"); }),
              HasSubstr("missing-dir/x.gguf: cannot create a temporary file"));
}

TEST(GgufWriter, FillersStreamOneTensorAtATime) {
  GgufWriter w;
  std::vector<std::string> calls;
  for (int i = 0; i < 3; ++i) {
    w.add_tensor(fmt::format("t{}", i), GgmlType::F32, {8 + i}, [&calls, i](std::span<uint8_t> out) {
      calls.push_back(fmt::format("t{}:{}", i, out.size()));
      std::fill(out.begin(), out.end(), static_cast<uint8_t>(i + 1));
    });
  }
  test::TempDir dir;
  w.write(dir / "s.gguf");
  EXPECT_EQ(calls, (std::vector<std::string>{"t0:32", "t1:36", "t2:40"}));
  GgufFile f = GgufFile::open(dir / "s.gguf");
  auto d = f.tensor_data(f.tensor("t1"));
  EXPECT_TRUE(std::all_of(d.begin(), d.end(), [](uint8_t b) { return b == 2; }));
}

TEST(GgufWriter, OtherAlignmentAddsTheKey) {
  GgufWriter w = make_writer(64);
  GgufFile f = GgufFile::parse(w.to_bytes(), "aligned64");
  EXPECT_EQ(f.metadata().get_u64("general.alignment"), 64u);
  EXPECT_EQ(f.metadata().entries().back().first, "general.alignment");  // appended after the user's keys
  EXPECT_EQ(f.data_offset() % 64, 0u);
  expect_matches_test_data(f, 64);

  // An explicit key that agrees is kept where it is; one that disagrees is an error.
  GgufWriter ok(128);
  ok.set("general.alignment", Value(uint32_t{128}));
  ok.set("x", Value(1u));
  ok.add_tensor("t", GgmlType::F32, {4}, pattern(16, 0));
  GgufFile g = GgufFile::parse(ok.to_bytes(), "aligned128");
  EXPECT_EQ(g.metadata().entries().front().first, "general.alignment");
  EXPECT_EQ(g.alignment(), 128u);
  EXPECT_EQ(g.data_offset() % 128, 0u);

  GgufWriter bad(32);
  bad.set("general.alignment", Value(uint32_t{64}));
  EXPECT_THAT(error_of([&] { bad.to_bytes(); }),
              HasSubstr("metadata key 'general.alignment' is 64, but the writer aligns to 32"));
  bad.set("general.alignment", Value("32"));
  EXPECT_THAT(error_of([&] { bad.to_bytes(); }), HasSubstr("'general.alignment' is \"32\""));
}

TEST(GgufWriter, Version2FilesReadTheSame) {
  // v2 and v3 share the layout (64-bit counts); only the version field differs.
  auto bytes = make_writer().to_bytes();
  bytes[4] = 2;
  GgufFile f = GgufFile::parse(bytes, "v2");
  EXPECT_EQ(f.version(), 2u);
  EXPECT_EQ(f.metadata(), all_value_types());
  expect_matches_test_data(f, 32);
}

TEST(GgufWriter, NoTensorsMeansNoDataSection) {
  GgufWriter w;
  w.set("tokenizer.ggml.model", Value("llama"));
  auto bytes = w.to_bytes();
  GgufFile f = GgufFile::parse(bytes, "vocab");
  EXPECT_TRUE(f.tensors().empty());
  EXPECT_EQ(f.file_size(), bytes.size());
  EXPECT_EQ(bytes.size(), 24u + 8 + 20 + 4 + 8 + 5);
  EXPECT_GE(f.data_offset(), f.file_size());
}

// Reads a file and writes it again with the same metadata and tensors in the same order.
std::vector<uint8_t> rewrite(const GgufFile& f) {
  GgufWriter w(f.alignment());
  w.metadata() = f.metadata();
  for (const auto& t : f.tensors()) {
    auto src = f.tensor_data(t);
    w.add_tensor(t.name, t.type, t.ne,
                 [src](std::span<uint8_t> out) { std::copy(src.begin(), src.end(), out.begin()); });
  }
  return w.to_bytes();
}

TEST(GgufWriter, RewritingRealFilesIsByteIdentical) {
  int n = 0;
  for (const auto& root : {test::shared_dir() / "models", test::shared_dir() / "fixtures"}) {
    for (const auto& e : fs::recursive_directory_iterator(root)) {
      if (!e.is_regular_file() || e.path().extension() != ".gguf") continue;
      SCOPED_TRACE(e.path().string());
      auto original = test::read_file(e.path());
      GgufFile f = GgufFile::parse(original, e.path().string());
      auto again = rewrite(f);
      ASSERT_EQ(again.size(), original.size());
      auto mismatch = std::mismatch(again.begin(), again.end(), original.begin());
      EXPECT_EQ(mismatch.first, again.end()) << "first difference at byte " << (mismatch.first - again.begin());
      ++n;
    }
  }
  EXPECT_GE(n, 39);
}

TEST(GgufWriter, RejectsBadTensors) {
  GgufWriter w;
  w.add_tensor("t", GgmlType::F32, {4}, pattern(16, 0));
  EXPECT_THAT(error_of([&] { w.add_tensor("t", GgmlType::F32, {4}, pattern(16, 0)); }),
              HasSubstr("tensor 't' is added twice"));
  EXPECT_THAT(error_of([&] { w.add_tensor("", GgmlType::F32, {4}, pattern(16, 0)); }),
              HasSubstr("tensor name must not be empty"));
  EXPECT_THAT(error_of([&] { w.add_tensor("u", GgmlType::F32, {}, pattern(4, 0)); }),
              HasSubstr("tensor 'u': 0 dimensions (must be 1 to 4)"));
  EXPECT_THAT(error_of([&] {
                w.add_tensor("u", GgmlType::F32, {1, 1, 1, 1, 1}, pattern(4, 0));
              }),
              HasSubstr("5 dimensions"));
  EXPECT_THAT(error_of([&] {
                w.add_tensor("u", GgmlType::F32, {4, 0}, pattern(0, 0));
              }),
              HasSubstr("tensor 'u': ne[1] = 0"));
  EXPECT_THAT(error_of([&] {
                w.add_tensor("u", GgmlType::F32, {int64_t{1} << 32, int64_t{1} << 32}, [](std::span<uint8_t>) {});
              }),
              HasSubstr("element count overflows"));
  EXPECT_THAT(error_of([&] { w.add_tensor("u", GgmlType::Q8_0, {48}, pattern(51, 0)); }),
              HasSubstr("tensor 'u': row length ne[0] = 48 is not a multiple of the q8_0 block size 32"));
  EXPECT_THAT(error_of([&] { w.add_tensor("u", GgmlType::F16, {4}, pattern(16, 0)); }),
              HasSubstr("tensor 'u': 16 bytes of data given, but its type and shape take 8 bytes"));
  EXPECT_THAT(error_of([&] { w.add_tensor("u", GgmlType::F16, {4}, GgufWriter::Filler{}); }),
              HasSubstr("no data filler"));
  EXPECT_THAT(error_of([] { GgufWriter bad(48); }), HasSubstr("alignment 48 is not a power of two"));
  EXPECT_THAT(error_of([] { GgufWriter bad(0); }), HasSubstr("alignment 0 is not a power of two"));
}

TEST(GgufWriter, RejectsMetadataTheFormatCannotHold) {
  GgufWriter w;
  w.set("mixed", Value(std::vector<Value>{Value(1u), Value("two")}));
  EXPECT_THAT(error_of([&] { w.to_bytes(); }),
              HasSubstr("metadata key 'mixed': array element 1 has type string, but the array holds uint32"));
  GgufWriter e;
  e.set("", Value(1u));
  EXPECT_THAT(error_of([&] { e.to_bytes(); }), HasSubstr("metadata key must not be empty"));
  GgufWriter deep;
  Value v = Value::array(ValueType::UINT8, {});
  for (int i = 0; i < kMaxArrayDepth; ++i) v = Value::array(ValueType::ARRAY, {v});
  deep.set("deep", v);
  EXPECT_THAT(error_of([&] { deep.to_bytes(); }), HasSubstr("nested deeper than 8 levels"));
}

}  // namespace
}  // namespace tessera::gguf
