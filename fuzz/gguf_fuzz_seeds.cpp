// Writes the seed corpus for gguf_reader_fuzz: a few small writer-made GGUF files, plus copies of the
// files named on the command line. Usage: gguf_fuzz_seeds OUT_DIR [FILE.gguf ...]
#include <cstdio>
#include <exception>
#include <filesystem>
#include <string>
#include <vector>

#include "gguf/gguf_writer.h"

namespace {

namespace fs = std::filesystem;
using tessera::GgmlType;
using tessera::gguf::GgufWriter;
using tessera::gguf::Value;
using tessera::gguf::ValueType;

std::vector<uint8_t> bytes_of(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(seed + i);
  return v;
}

void write_seeds(const fs::path& dir) {
  GgufWriter all;
  all.set("general.architecture", Value("llama"));
  all.set("u8", Value(uint8_t{1}));
  all.set("i8", Value(int8_t{-1}));
  all.set("u16", Value(uint16_t{2}));
  all.set("i16", Value(int16_t{-2}));
  all.set("u32", Value(3u));
  all.set("i32", Value(-3));
  all.set("f32", Value(0.5f));
  all.set("bool", Value(true));
  all.set("u64", Value(uint64_t{4}));
  all.set("i64", Value(int64_t{-4}));
  all.set("f64", Value(0.25));
  all.set("tokens", Value::array(ValueType::STRING, {Value("<s>"), Value("a"), Value("")}));
  all.set("scores", Value::array(ValueType::FLOAT32, {Value(0.0f), Value(-1.0f)}));
  all.set("flags", Value::array(ValueType::BOOL, {Value(false), Value(true)}));
  all.set("empty", Value::array(ValueType::INT32, {}));
  all.set("nested", Value::array(ValueType::ARRAY, {Value::array(ValueType::UINT16, {Value(uint16_t{5})})}));
  all.add_tensor("a", GgmlType::F32, {4, 2}, bytes_of(32, 1));
  all.add_tensor("b", GgmlType::Q8_0, {32}, bytes_of(34, 2));
  all.add_tensor("c", GgmlType::F16, {3, 1, 1, 2}, bytes_of(12, 3));
  all.write(dir / "writer-all-types.gguf");

  GgufWriter vocab;
  vocab.set("tokenizer.ggml.model", Value("gpt2"));
  vocab.set("tokenizer.ggml.merges", Value::array(ValueType::STRING, {Value("a b"), Value("ab c")}));
  vocab.write(dir / "writer-vocab-only.gguf");

  GgufWriter aligned(64);
  aligned.set("general.name", Value("aligned"));
  aligned.add_tensor("w", GgmlType::Q4_K, {256}, bytes_of(144, 4));
  aligned.add_tensor("x", GgmlType::I32, {1}, bytes_of(4, 5));
  aligned.write(dir / "writer-aligned64.gguf");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s OUT_DIR [FILE.gguf ...]\n", argv[0]);
    return 2;
  }
  try {
    fs::path dir = argv[1];
    fs::create_directories(dir);
    write_seeds(dir);
    for (int i = 2; i < argc; ++i) {
      fs::path src = argv[i];
      fs::copy_file(src, dir / src.filename(), fs::copy_options::overwrite_existing);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gguf_fuzz_seeds: %s\n", e.what());
    return 1;
  }
  return 0;
}
