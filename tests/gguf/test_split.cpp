// Split GGUF sets (llama.cpp's gguf-split layout): the set opened from its first file is the merged file,
// and every broken set is an Error naming the file at fault.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "gguf/gguf_split.h"
#include "gguf/gguf_writer.h"
#include "support/error_text.h"
#include "support/test_paths.h"
#include "util/error.h"

namespace tessera::gguf {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

using test::error_of;

fs::path fixture(const std::string& name) { return test::shared_dir() / "fixtures" / "models" / name; }

void expect_same_content(const GgufFile& set, const GgufFile& single) {
  EXPECT_EQ(set.metadata(), single.metadata());
  ASSERT_EQ(set.tensors().size(), single.tensors().size());
  for (size_t i = 0; i < set.tensors().size(); ++i) {
    const TensorInfo& a = set.tensors()[i];
    const TensorInfo& b = single.tensors()[i];
    EXPECT_EQ(a.name, b.name);
    EXPECT_EQ(a.type, b.type) << a.name;
    EXPECT_EQ(a.ne, b.ne) << a.name;
    ASSERT_EQ(a.n_bytes, b.n_bytes) << a.name;
    const auto da = set.tensor_data(a);
    const auto db = single.tensor_data(b);
    ASSERT_EQ(da.size(), db.size());
    EXPECT_EQ(std::memcmp(da.data(), db.data(), da.size()), 0) << a.name;
    EXPECT_EQ(set.find_tensor(a.name), &a);
  }
}

// A small model-like file: metadata and six tensors of different types and shapes.
fs::path write_single(const fs::path& path, uint8_t seed = 1, int n_tensors = 6) {
  GgufWriter w;
  w.set("general.architecture", Value(std::string("llama")));
  w.set("general.name", Value(std::string("split test")));
  w.set("llama.block_count", Value(uint32_t{3}));
  for (int i = 0; i < n_tensors; ++i) {
    std::vector<uint8_t> data(static_cast<size_t>(64 * (i + 1)) * 4);
    for (size_t j = 0; j < data.size(); ++j) data[j] = static_cast<uint8_t>(seed + j * 13 + static_cast<size_t>(i));
    w.add_tensor(fmt::format("blk.{}.w", i), GgmlType::F32, {64, i + 1}, std::move(data));
  }
  w.write(path);
  return path;
}

TEST(Split, FixtureSetMatchesTheMergedFile) {
  const GgufFile set = GgufFile::open(fixture("gemma4moe-q4_k_m-split-00001-of-00003.gguf"));
  const GgufFile single = GgufFile::open(fixture("gemma4moe-q4_k_m.gguf"));
  EXPECT_EQ(set.n_parts(), 3u);
  EXPECT_EQ(single.n_parts(), 1u);
  EXPECT_THAT(set.part_name(2), HasSubstr("gemma4moe-q4_k_m-split-00003-of-00003.gguf"));
  uint64_t total = 0;
  for (int i = 1; i <= 3; ++i) {
    total += fs::file_size(fixture(fmt::format("gemma4moe-q4_k_m-split-{:05d}-of-00003.gguf", i)));
  }
  EXPECT_EQ(set.file_size(), total);
  EXPECT_FALSE(set.metadata().contains("split.count"));
  expect_same_content(set, single);
  // Tensors really come from all three files.
  EXPECT_EQ(set.tensors().front().part, 0u);
  EXPECT_EQ(set.tensors().back().part, 2u);
}

TEST(Split, LaterPartGivenDirectlyNamesTheFirst) {
  const std::string e = error_of([] { GgufFile::open(fixture("gemma4moe-q4_k_m-split-00002-of-00003.gguf")); });
  EXPECT_THAT(e, HasSubstr("part 2 of a split GGUF set of 3 files"));
  EXPECT_THAT(e, HasSubstr("gemma4moe-q4_k_m-split-00001-of-00003.gguf"));
}

TEST(Split, ParsingBytesNeverOpensOtherFiles) {
  const auto bytes = test::read_file(fixture("gemma4moe-q4_k_m-split-00001-of-00003.gguf"));
  const GgufFile f = GgufFile::parse(bytes, "gemma4moe-q4_k_m-split-00001-of-00003.gguf");
  EXPECT_EQ(f.n_parts(), 1u);
  EXPECT_EQ(f.metadata().get_u64("split.count"), 3u);
  EXPECT_EQ(f.file_size(), bytes.size());
}

TEST(Split, WrittenSetMatchesTheMergedFile) {
  test::TempDir dir;
  const GgufFile single = GgufFile::open(write_single(dir / "m.gguf"));
  for (uint64_t n : {1u, 2u, 3u, 6u}) {
    const auto paths = write_split(single, dir / fmt::format("m{}", n), n);
    ASSERT_EQ(paths.size(), n);
    EXPECT_EQ(paths.back().filename().string(), fmt::format("m{}-{:05d}-of-{:05d}.gguf", n, n, n));
    const GgufFile set = GgufFile::open(paths.front());
    EXPECT_EQ(set.n_parts(), n);
    expect_same_content(set, single);
    // Later parts hold only the split keys, as llama.cpp writes them.
    if (n > 1) {
      const GgufFile last = GgufFile::parse(test::read_file(paths.back()), "last");
      EXPECT_EQ(last.metadata().size(), 3u);
      EXPECT_EQ(last.metadata().get_u64("split.no"), n - 1);
      EXPECT_EQ(last.metadata().get_u64("split.tensors.count"), 6u);
    }
  }
  EXPECT_THAT(error_of([&] { write_split(single, dir / "x", 7); }), HasSubstr("cannot split 6 tensors into 7"));
  EXPECT_THAT(error_of([&] { write_split(single, dir / "x", 0); }), HasSubstr("not 0"));
}

TEST(Split, WriterCopiesTheFixtureSetLikeLlamaCpp) {
  test::TempDir dir;
  const GgufFile single = GgufFile::open(fixture("gemma4moe-q4_k_m.gguf"));
  const auto paths = write_split(single, dir / "g", 3, single.alignment());
  const GgufFile mine = GgufFile::open(paths.front());
  expect_same_content(mine, single);
  const GgufFile theirs = GgufFile::open(fixture("gemma4moe-q4_k_m-split-00001-of-00003.gguf"));
  EXPECT_EQ(mine.file_size(), theirs.file_size());
}

class BrokenSet : public ::testing::Test {
 protected:
  void SetUp() override {
    const GgufFile single = GgufFile::open(write_single(dir_ / "m.gguf"));
    paths_ = write_split(single, dir_ / "m", 3);
  }
  std::string open_error() const {
    return error_of([&] { GgufFile::open(paths_.front()); });
  }
  test::TempDir dir_;
  std::vector<fs::path> paths_;
};

TEST_F(BrokenSet, MissingPartIsNamed) {
  fs::remove(paths_[1]);
  const std::string e = open_error();
  EXPECT_THAT(e, HasSubstr("part 2 of 3 is missing"));
  EXPECT_THAT(e, HasSubstr(paths_[1].string()));
}

TEST_F(BrokenSet, DuplicatedPartIsNamed) {
  fs::copy_file(paths_[2], paths_[1], fs::copy_options::overwrite_existing);
  const std::string e = open_error();
  EXPECT_THAT(e, HasSubstr(paths_[1].string()));
  EXPECT_THAT(e, HasSubstr("split.no is 2 (part 3 of the set), expected 1 (part 2)"));
}

TEST_F(BrokenSet, PartFromAnotherSetIsNamed) {
  const GgufFile other = GgufFile::open(write_single(dir_ / "o.gguf", 9, 5));
  const auto other_paths = write_split(other, dir_ / "o", 3);
  fs::copy_file(other_paths[1], paths_[1], fs::copy_options::overwrite_existing);
  const std::string e = open_error();
  EXPECT_THAT(e, HasSubstr(paths_[1].string()));
  EXPECT_THAT(e, HasSubstr("split.tensors.count is 5, but the first file"));
}

TEST_F(BrokenSet, SplitCountDisagreementIsNamed) {
  const GgufFile single = GgufFile::open(dir_ / "m.gguf");
  const auto four = write_split(single, dir_ / "f", 4);
  fs::copy_file(four[1], paths_[1], fs::copy_options::overwrite_existing);
  const std::string e = open_error();
  EXPECT_THAT(e, HasSubstr(paths_[1].string()));
  EXPECT_THAT(e, HasSubstr("split.count is 4, but the first file"));
}

TEST_F(BrokenSet, TensorNamedTwiceIsNamed) {
  // A hand-made part 2 that repeats a tensor of part 1 (and keeps the counts right).
  const GgufFile first = GgufFile::parse(test::read_file(paths_[0]), "first");
  const GgufFile second = GgufFile::parse(test::read_file(paths_[1]), "second");
  GgufWriter w;
  w.metadata() = second.metadata();
  const TensorInfo& dup = first.tensors().front();
  w.add_tensor(dup.name, dup.type, dup.ne, std::vector<uint8_t>(dup.n_bytes, 0));
  for (size_t i = 1; i < second.tensors().size(); ++i) {
    const TensorInfo& t = second.tensors()[i];
    w.add_tensor(t.name, t.type, t.ne, std::vector<uint8_t>(t.n_bytes, 0));
  }
  w.write(paths_[1]);
  const std::string e = open_error();
  EXPECT_THAT(e, HasSubstr("tensor 'blk.0.w' is in both"));
  EXPECT_THAT(e, HasSubstr(paths_[1].string()));
}

TEST_F(BrokenSet, TensorCountMismatchIsNamed) {
  fs::remove(paths_[2]);
  fs::remove(paths_[1]);
  fs::rename(paths_[0], dir_ / "solo-00001-of-00001.gguf");
  // The first file alone, claiming a set of one: the tensor count no longer adds up.
  const GgufFile part = GgufFile::parse(test::read_file(dir_ / "solo-00001-of-00001.gguf"), "solo");
  GgufWriter w;
  w.metadata() = part.metadata();
  w.set("split.count", Value(uint16_t{1}));
  for (const auto& t : part.tensors()) w.add_tensor(t.name, t.type, t.ne, std::vector<uint8_t>(t.n_bytes, 0));
  w.write(dir_ / "solo-00001-of-00001.gguf");
  const std::string e = error_of([&] { GgufFile::open(dir_ / "solo-00001-of-00001.gguf"); });
  EXPECT_THAT(e, HasSubstr("hold 2 tensors, but split.tensors.count says 6"));
}

TEST_F(BrokenSet, FirstFileMustFollowTheNamePattern) {
  fs::rename(paths_[0], dir_ / "renamed.gguf");
  const std::string e = error_of([&] { GgufFile::open(dir_ / "renamed.gguf"); });
  EXPECT_THAT(e, HasSubstr("must be named PREFIX-00001-of-00003.gguf"));
}

TEST_F(BrokenSet, SplitKeyOfWrongTypeIsAnError) {
  const GgufFile part = GgufFile::parse(test::read_file(paths_[0]), "first");
  GgufWriter w;
  w.metadata() = part.metadata();
  w.set("split.count", Value(std::string("three")));
  for (const auto& t : part.tensors()) w.add_tensor(t.name, t.type, t.ne, std::vector<uint8_t>(t.n_bytes, 0));
  w.write(paths_[0]);
  EXPECT_THAT(open_error(), HasSubstr("a split GGUF file, but"));
}

}  // namespace
}  // namespace tessera::gguf
