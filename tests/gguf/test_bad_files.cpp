// Hand-made broken GGUF files: each must give its own clear Error (file, byte, the facts), never a crash.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "raw_gguf.h"
#include "util/error.h"

namespace tessera::gguf {
namespace {

using test::RawGguf;
using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr uint32_t kF32 = 0;
constexpr uint32_t kQ4_0 = 2;

std::string parse_error(const std::vector<uint8_t>& bytes) {
  try {
    GgufFile::parse(bytes, "bad.gguf");
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "the file was accepted";
  return {};
}
std::string parse_error(const RawGguf& raw) { return parse_error(raw.bytes()); }

// One F32 tensor of n elements at offset 0, after the given metadata.
RawGguf one_tensor(uint64_t n, uint32_t type = kF32, uint64_t offset = 0) {
  RawGguf r;
  r.header(1, 0).tensor("w", {n}, type, offset).pad_to(32);
  return r;
}

TEST(GgufBadFiles, ValidBaselineParses) {
  RawGguf r = one_tensor(8);
  r.zeros(32);
  GgufFile f = GgufFile::parse(r.bytes(), "ok.gguf");
  EXPECT_EQ(f.tensors().size(), 1u);
  EXPECT_EQ(f.data_offset(), 64u);
}

TEST(GgufBadFiles, EveryTruncationIsAnError) {
  // A file that ends exactly where its last tensor's data ends, so no prefix of it is valid.
  GgufWriter w;
  w.set("general.architecture", Value("llama"));
  w.set("a.u8", Value(uint8_t{1}));
  w.set("a.bool", Value(true));
  w.set("a.f64", Value(2.5));
  w.set("a.tokens", Value::array(ValueType::STRING, {Value("<s>"), Value("hello")}));
  w.set("a.nested", Value::array(ValueType::ARRAY, {Value::array(ValueType::INT16, {Value(int16_t{3})})}));
  w.set("a.empty", Value::array(ValueType::FLOAT32, {}));
  w.add_tensor("t0", GgmlType::F32, {8}, std::vector<uint8_t>(32, 1));
  w.add_tensor("t1", GgmlType::Q4_0, {64}, std::vector<uint8_t>(36, 2));
  w.add_tensor("t2", GgmlType::F16, {16}, std::vector<uint8_t>(32, 3));
  auto bytes = w.to_bytes();
  ASSERT_NO_THROW(GgufFile::parse(bytes, "full.gguf"));
  for (size_t n = 0; n < bytes.size(); ++n) {
    std::vector<uint8_t> prefix(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(n));
    std::string msg = parse_error(prefix);
    EXPECT_THAT(msg, HasSubstr("bad.gguf: ")) << "prefix of " << n << " bytes";
    EXPECT_THAT(msg, ::testing::AnyOf(HasSubstr("byte "), HasSubstr("(byte "))) << n;
  }
  EXPECT_THAT(parse_error(std::vector<uint8_t>(bytes.begin(), bytes.begin() + 30)),
              HasSubstr("bad.gguf: byte 8: tensor count 3 needs at least 99 bytes of tensor infos, but the file has "
                        "only 6 bytes after the header"));
  EXPECT_THAT(parse_error(RawGguf().header(0, 1).key("abc", 4).u8(1).u8(2)),
              HasSubstr("bad.gguf: byte 39: key 'abc': unexpected end of file reading a uint32 value (4 bytes needed, "
                        "2 left)"));
  EXPECT_THAT(
      parse_error(RawGguf().header(0, 1).u64(50).u8('a').u8('b').zeros(12)),
      HasSubstr(
          "bad.gguf: byte 24: key/value pair 0: the key length 50 runs past the end of the file (14 bytes left)"));
  EXPECT_THAT(parse_error(std::vector<uint8_t>(bytes.begin(), bytes.end() - 1)), HasSubstr("tensor 't2' (byte "));
}

TEST(GgufBadFiles, Header) {
  EXPECT_THAT(parse_error(std::vector<uint8_t>{}), HasSubstr("bad.gguf: byte 0: the file is 0 bytes long, too short"));
  EXPECT_THAT(parse_error(std::vector<uint8_t>{'G', 'G', 'U'}), HasSubstr("3 bytes long"));
  EXPECT_THAT(parse_error(std::vector<uint8_t>{'G', 'G', 'M', 'L', 3, 0, 0, 0}),
              HasSubstr("bad.gguf: byte 0: not a GGUF file (magic 47 47 4d 4c"));
  EXPECT_THAT(parse_error(RawGguf().header(0, 0, 1)),
              HasSubstr("bad.gguf: byte 4: GGUF version 1 is not supported (it used 32-bit counts)"));
  EXPECT_THAT(parse_error(RawGguf().header(0, 0, 99)),
              HasSubstr("bad.gguf: byte 4: unsupported GGUF version 99 (supported: 2 and 3)"));
  EXPECT_THAT(parse_error(RawGguf().header(0, 0, 0x03000000)), HasSubstr("byte 4: big-endian GGUF files"));
  EXPECT_THAT(parse_error(RawGguf().header(uint64_t{1} << 32, 0)),
              HasSubstr("bad.gguf: byte 8: tensor count 4294967296 exceeds the limit of 1048576"));
  EXPECT_THAT(parse_error(RawGguf().header(0, uint64_t{1} << 40)),
              HasSubstr("bad.gguf: byte 16: key/value count 1099511627776 exceeds the limit of 1048576"));
  // Counts under the limit but more than the rest of the file could hold.
  EXPECT_THAT(parse_error(RawGguf().header(1000, 0).zeros(100)),
              HasSubstr("bad.gguf: byte 8: tensor count 1000 needs at least 33000 bytes"));
  EXPECT_THAT(parse_error(RawGguf().header(0, 1000).zeros(100)),
              HasSubstr("bad.gguf: byte 16: 1000 keys and 0 tensors need at least 14000 bytes, but the file has "
                        "only 100 bytes"));
}

TEST(GgufBadFiles, Keys) {
  EXPECT_THAT(parse_error(RawGguf().header(0, 1).u64(uint64_t{1} << 40).zeros(20)),
              HasSubstr("bad.gguf: byte 24: key/value pair 0: the key length 1099511627776 exceeds the limit"));
  EXPECT_THAT(
      parse_error(RawGguf().header(0, 1).u64(1000).zeros(20)),
      HasSubstr("byte 24: key/value pair 0: the key length 1000 runs past the end of the file (20 bytes left)"));
  EXPECT_THAT(parse_error(RawGguf().header(0, 1).kv_u32("", 1)),
              HasSubstr("byte 24: key/value pair 0: the key is empty"));
  EXPECT_THAT(parse_error(RawGguf().header(0, 2).kv_u32("a.b", 1).kv_u32("a.b", 2)),
              HasSubstr("bad.gguf: byte 43: key 'a.b': duplicate key (first at byte 24)"));
  EXPECT_THAT(parse_error(RawGguf().header(0, 1).key("a.b", 13).u32(0)),
              HasSubstr("bad.gguf: byte 35: key 'a.b': unknown value type 13"));
  EXPECT_THAT(parse_error(RawGguf().header(0, 1).key("a\x01", 13).u32(0)),
              HasSubstr("key 'a\\x01': unknown value type 13"));
}

TEST(GgufBadFiles, Values) {
  EXPECT_THAT(parse_error(RawGguf().header(0, 1).key("flag", 7).u8(2)),
              HasSubstr("bad.gguf: byte 40: key 'flag': bool value is 2 (must be 0 or 1)"));
  EXPECT_THAT(
      parse_error(RawGguf().header(0, 1).key("s", 8).u64(uint64_t{1} << 62).zeros(8)),
      HasSubstr("bad.gguf: byte 37: key 's': a string length 4611686018427387904 exceeds the limit of 268435456"));
  EXPECT_THAT(parse_error(RawGguf().header(0, 1).key("s", 8).u64(100).zeros(8)),
              HasSubstr("byte 37: key 's': a string length 100 runs past the end of the file (8 bytes left)"));
  EXPECT_THAT(parse_error(RawGguf().header(0, 1).key("arr", 9).u32(0).u64(uint64_t{1} << 40).zeros(8)),
              HasSubstr("bad.gguf: byte 43: key 'arr': array length 1099511627776 exceeds the limit of 67108864"));
  EXPECT_THAT(parse_error(RawGguf().header(0, 1).key("arr", 9).u32(4).u64(1000000).zeros(8)),
              HasSubstr("byte 43: key 'arr': array of 1000000 uint32 values needs at least 4000000 bytes, but only 8 "
                        "are left"));
  EXPECT_THAT(parse_error(RawGguf().header(0, 1).key("arr", 9).u32(13).u64(0)),
              HasSubstr("byte 39: key 'arr': unknown array element type 13"));
  EXPECT_THAT(parse_error(RawGguf().header(0, 1).key("arr", 9).u32(7).u64(2).u8(1).u8(3)),
              HasSubstr("byte 52: key 'arr': bool value is 3"));
  EXPECT_THAT(parse_error(RawGguf().header(0, 1).key("arr", 9).u32(8).u64(2).str("ok").u64(1u << 30)),
              HasSubstr("byte 61: key 'arr': a string length 1073741824 exceeds the limit"));

  // Arrays nest at most kMaxArrayDepth levels deep.
  auto nested = [](int levels) {
    RawGguf r;
    r.header(0, 1).key("deep", 9);
    for (int i = 1; i < levels; ++i) r.u32(9).u64(1);
    r.u32(4).u64(0);
    return r;
  };
  EXPECT_NO_THROW(GgufFile::parse(nested(kMaxArrayDepth).bytes(), "ok.gguf"));
  EXPECT_THAT(parse_error(nested(kMaxArrayDepth + 1)), HasSubstr("key 'deep': arrays are nested deeper than 8 levels"));
}

TEST(GgufBadFiles, Alignment) {
  auto with_alignment = [](auto fill) {
    RawGguf r;
    r.header(0, 1);
    fill(r.str("general.alignment"));
    return r;
  };
  EXPECT_THAT(parse_error(with_alignment([](RawGguf& r) { r.u32(4).u32(48); })),
              HasSubstr("bad.gguf: byte 24: general.alignment 48 is not a power of two"));
  EXPECT_THAT(parse_error(with_alignment([](RawGguf& r) { r.u32(4).u32(0); })),
              HasSubstr("general.alignment 0 is not a power of two"));
  EXPECT_THAT(parse_error(with_alignment([](RawGguf& r) { r.u32(8).str("32"); })),
              HasSubstr("bad.gguf: byte 24: general.alignment has type string, expected an unsigned integer"));
  EXPECT_THAT(parse_error(with_alignment([](RawGguf& r) { r.u32(6).put(32.0f); })),
              HasSubstr("general.alignment has type float32"));
  EXPECT_THAT(parse_error(with_alignment([](RawGguf& r) { r.u32(5).put(int32_t{-32}); })),
              HasSubstr("general.alignment has the negative value -32"));
  // Other integer types are accepted, and the alignment applies to offsets and the data section.
  RawGguf ok;
  ok.header(2, 1).str("general.alignment").u32(10).u64(64);
  ok.tensor("a", {4}, kF32, 0).tensor("b", {4}, kF32, 64).pad_to(64).zeros(128);
  GgufFile f = GgufFile::parse(ok.bytes(), "ok.gguf");
  EXPECT_EQ(f.alignment(), 64u);
  EXPECT_EQ(f.data_offset() % 64, 0u);
  RawGguf misaligned;
  misaligned.header(1, 1).str("general.alignment").u32(4).u32(64).tensor("a", {4}, kF32, 32).pad_to(64).zeros(128);
  EXPECT_THAT(parse_error(misaligned), HasSubstr("tensor 'a': data offset 32 is not a multiple of the alignment 64"));
}

TEST(GgufBadFiles, TensorInfos) {
  EXPECT_THAT(parse_error(RawGguf().header(1, 0).tensor("", {4}, kF32, 0).pad_to(32).zeros(32)),
              HasSubstr("bad.gguf: byte 24: tensor 0: the tensor name is empty"));
  EXPECT_THAT(parse_error(RawGguf().header(1, 0).tensor("w", {}, kF32, 0).pad_to(32).zeros(32)),
              HasSubstr("bad.gguf: byte 33: tensor 'w': 0 dimensions (must be 1 to 4)"));
  EXPECT_THAT(parse_error(RawGguf().header(1, 0).tensor("w", {1, 1, 1, 1, 1}, kF32, 0).pad_to(32).zeros(32)),
              HasSubstr("byte 33: tensor 'w': 5 dimensions (must be 1 to 4)"));
  EXPECT_THAT(parse_error(RawGguf().header(1, 0).tensor("w", {4, 0}, kF32, 0).pad_to(32).zeros(32)),
              HasSubstr("byte 45: tensor 'w': ne[1] = 0 (each dimension must be 1 to 2^63-1)"));
  EXPECT_THAT(parse_error(RawGguf().header(1, 0).tensor("w", {uint64_t{1} << 63}, kF32, 0).pad_to(32).zeros(32)),
              HasSubstr("ne[0] = 9223372036854775808"));
  EXPECT_THAT(
      parse_error(RawGguf().header(1, 0).tensor("w", {uint64_t{1} << 32, uint64_t{1} << 32}, kF32, 0).pad_to(32)),
      HasSubstr("byte 45: tensor 'w': the element count overflows a 64-bit integer at ne[1] = 4294967296"));
  EXPECT_THAT(parse_error(RawGguf().header(1, 0).tensor("w", {uint64_t{1} << 40, 1 << 23}, kF32, 0).pad_to(32)),
              HasSubstr("the element count overflows"));
  // 2^62 F32 elements fit int64 but their byte size does not fit 64 bits.
  EXPECT_THAT(parse_error(RawGguf().header(1, 0).tensor("w", {uint64_t{1} << 62}, kF32, 0).pad_to(32)),
              HasSubstr("byte 33: tensor 'w': the byte size of 4611686018427387904 f32 elements overflows 64 bits"));
  EXPECT_THAT(parse_error(RawGguf().header(1, 0).tensor("w", {4}, 4, 0).pad_to(32).zeros(32)),
              HasSubstr("bad.gguf: byte 45: tensor 'w': unknown tensor type id 4"));
  EXPECT_THAT(parse_error(RawGguf().header(1, 0).tensor("w", {4}, 1000, 0).pad_to(32).zeros(32)),
              HasSubstr("unknown tensor type id 1000"));
  EXPECT_THAT(parse_error(one_tensor(48, kQ4_0).zeros(64)),
              HasSubstr("byte 33: tensor 'w': row length ne[0] = 48 is not a multiple of the q4_0 block size 32"));
  EXPECT_THAT(parse_error(one_tensor(8, kF32, 4).zeros(64)),
              HasSubstr("bad.gguf: byte 49: tensor 'w': data offset 4 is not a multiple of the alignment 32"));
  EXPECT_THAT(
      parse_error(RawGguf().header(2, 0).tensor("w", {4}, kF32, 0).tensor("w", {4}, kF32, 32).pad_to(32).zeros(64)),
      HasSubstr("bad.gguf: byte 57: tensor 'w': duplicate tensor name (first at byte 24)"));
}

TEST(GgufBadFiles, TensorData) {
  EXPECT_THAT(parse_error(one_tensor(1024, kF32, 1024).zeros(2048)),
              AllOf(HasSubstr("bad.gguf: tensor 'w' (byte 24): data [offset 1024, 4096 bytes] ends past the end of "
                              "the file (2112 bytes"),
                    HasSubstr("the data section starts at byte 64")));
  // The data section itself missing.
  EXPECT_THAT(parse_error(one_tensor(8)), HasSubstr("tensor 'w' (byte 24): data [offset 0, 32 bytes] ends past"));
  // An offset so large that offset + size wraps around 64 bits.
  EXPECT_THAT(parse_error(one_tensor(8, kF32, ~uint64_t{31}).zeros(64)),
              HasSubstr("data [offset 18446744073709551584, 32 bytes] ends past the end of the file"));
  RawGguf overlap;
  overlap.header(2, 0).tensor("a", {16}, kF32, 0).tensor("b", {8}, kF32, 32).pad_to(32).zeros(64);
  EXPECT_THAT(parse_error(overlap), HasSubstr("bad.gguf: tensor 'b' (byte 57): data [offset 32, 32 bytes] overlaps "
                                              "tensor 'a' (byte 24) [offset 0, 64 bytes]"));
  RawGguf same;
  same.header(2, 0).tensor("a", {8}, kF32, 0).tensor("b", {8}, kF32, 0).pad_to(32).zeros(64);
  EXPECT_THAT(parse_error(same), HasSubstr("tensor 'b' (byte 57): data [offset 0, 32 bytes] overlaps tensor 'a'"));
  // Listed out of order but disjoint: fine.
  RawGguf shuffled;
  shuffled.header(2, 0).tensor("a", {8}, kF32, 32).tensor("b", {8}, kF32, 0).pad_to(32).zeros(64);
  EXPECT_NO_THROW(GgufFile::parse(shuffled.bytes(), "ok.gguf"));
}

TEST(GgufBadFiles, OpenNamesThePath) {
  EXPECT_THROW(GgufFile::open("/nonexistent/model.gguf"), Error);
  try {
    GgufFile::open("/nonexistent/model.gguf");
  } catch (const Error& e) {
    EXPECT_THAT(std::string(e.what()), HasSubstr("/nonexistent/model.gguf"));
  }
}

}  // namespace
}  // namespace tessera::gguf
