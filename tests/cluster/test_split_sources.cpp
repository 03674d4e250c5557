// Split GGUF sets on the worker side: the content hashes (the worker cache's keys) of a set equal the merged
// file's, and a worker finds every tensor of a stage in whichever file of the set holds it.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "cluster/stage_assembler.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "net/codec.h"
#include "support/test_paths.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;

fs::path fixtures() { return test::shared_dir() / "fixtures/models"; }
const char* const kFirst = "gemma4moe-q4_k_m-split-00001-of-00003.gguf";

TEST(Split, ContentHashesOfASetEqualTheMergedFiles) {
  const auto set = gguf::GgufFile::open(fixtures() / kFirst);
  const auto single = gguf::GgufFile::open(fixtures() / "gemma4moe-q4_k_m.gguf");
  ASSERT_EQ(set.n_parts(), 3u);
  ASSERT_EQ(set.tensors().size(), single.tensors().size());
  for (const auto& t : set.tensors()) {
    const auto* u = single.find_tensor(t.name);
    ASSERT_NE(u, nullptr) << t.name;
    EXPECT_EQ(net::content_hash(set.tensor_data(t)), net::content_hash(single.tensor_data(*u))) << t.name;
  }
}

// A stage request as the head sends it for the tensors whose names pass `want`.
template <typename Want>
net::LoadStage request_for(const gguf::GgufFile& file, Want want) {
  net::LoadStage req;
  req.file_name = fs::path(file.name()).filename().string();
  req.file_size = file.file_size();
  gguf::GgufWriter md;
  for (const auto& [key, value] : file.metadata().entries()) {
    if (key.rfind("tokenizer.", 0) != 0) md.set(key, value);
  }
  req.model_metadata = md.to_bytes();
  for (const auto& t : file.tensors()) {
    if (!want(t)) continue;
    net::TensorInfo info;
    info.name = t.name;
    info.type = t.type;
    info.n_bytes = t.n_bytes;
    for (auto d : t.ne) info.shape.push_back(static_cast<uint64_t>(d));
    info.hash = net::content_hash(file.tensor_data(t));
    req.tensors.push_back(info);
  }
  return req;
}

TEST(Split, WorkerFindsAStagesTensorsInWhicheverFileHoldsThem) {
  const auto set = gguf::GgufFile::open(fixtures() / kFirst);
  // One tensor from each file of the set.
  std::vector<std::string> names;
  for (uint32_t part = 0; part < 3; ++part) {
    for (const auto& t : set.tensors()) {
      if (t.part == part) {
        names.push_back(t.name);
        break;
      }
    }
  }
  ASSERT_EQ(names.size(), 3u);
  const auto req = request_for(
      set, [&](const gguf::TensorInfo& t) { return std::find(names.begin(), names.end(), t.name) != names.end(); });
  cluster::AssemblerOptions o;
  o.models_dir = fixtures();
  cluster::StageAssembler a(req, o);
  EXPECT_EQ(a.reply().have.size(), 3u);
  EXPECT_TRUE(a.reply().need.empty());
  EXPECT_EQ(a.bytes_needed(), 0u);
  EXPECT_NE(a.found_in().find("a split set of 3 files"), std::string::npos) << a.found_in();
  EXPECT_TRUE(a.local_problem().empty());
  const auto source = a.finish();
  for (const auto& name : names) {
    const auto* t = source->find_tensor(name);
    ASSERT_NE(t, nullptr) << name;
    const auto data = source->tensor_data(*t);
    const auto expected = set.tensor_data(set.tensor(name));
    ASSERT_EQ(data.size(), expected.size());
    EXPECT_TRUE(std::equal(data.begin(), data.end(), expected.begin())) << name;
  }
}

TEST(Split, WorkerWithABrokenSetAsksForTheTensorsAndSaysWhy) {
  test::TempDir dir;
  fs::create_directories(dir / "models");
  for (const char* n : {"00001", "00003"}) {
    const std::string name = std::string("gemma4moe-q4_k_m-split-") + n + "-of-00003.gguf";
    fs::copy_file(fixtures() / name, dir / "models" / name);
  }
  const auto set = gguf::GgufFile::open(fixtures() / kFirst);
  const auto req = request_for(set, [](const gguf::TensorInfo& t) { return t.name.rfind("blk.0.", 0) == 0; });
  ASSERT_FALSE(req.tensors.empty());
  cluster::AssemblerOptions o;
  o.models_dir = dir / "models";
  cluster::StageAssembler a(req, o);
  EXPECT_TRUE(a.reply().have.empty());
  EXPECT_GT(a.bytes_needed(), 0u);
  EXPECT_NE(a.local_problem().find("part 2 of 3 is missing"), std::string::npos) << a.local_problem();
}

TEST(Split, WorkerUsesTheSameModelInTheOtherForm) {
  const auto set = gguf::GgufFile::open(fixtures() / kFirst);
  const auto single = gguf::GgufFile::open(fixtures() / "gemma4moe-q4_k_m.gguf");
  const auto all = [](const gguf::TensorInfo&) { return true; };
  {
    // The head has the merged file; the worker only the set (named after it).
    test::TempDir dir;
    for (int i = 1; i <= 3; ++i) {
      fs::copy_file(fixtures() / fmt::format("gemma4moe-q4_k_m-split-{:05d}-of-00003.gguf", i),
                    dir / fmt::format("gemma4moe-q4_k_m-{:05d}-of-00003.gguf", i));
    }
    fs::copy_file(fixtures() / "gemma4moe-f32.gguf", dir / "unrelated-00001-of-00001.gguf");
    cluster::AssemblerOptions o;
    o.models_dir = dir.path();
    cluster::StageAssembler a(request_for(single, all), o);
    EXPECT_EQ(a.reply().have.size(), single.tensors().size());
    EXPECT_EQ(a.bytes_needed(), 0u);
    EXPECT_NE(a.found_in().find("gemma4moe-q4_k_m-00001-of-00003.gguf (a split set of 3 files)"), std::string::npos)
        << a.found_in();
  }
  {
    // The head has the set; the worker only the merged file (named after it).
    test::TempDir dir;
    fs::copy_file(fixtures() / "gemma4moe-q4_k_m.gguf", dir / "gemma4moe-q4_k_m-split.gguf");
    cluster::AssemblerOptions o;
    o.models_dir = dir.path();
    cluster::StageAssembler a(request_for(set, all), o);
    EXPECT_EQ(a.reply().have.size(), set.tensors().size());
    EXPECT_EQ(a.bytes_needed(), 0u);
    EXPECT_NE(a.found_in().find("gemma4moe-q4_k_m-split.gguf"), std::string::npos) << a.found_in();
  }
}

}  // namespace
}  // namespace tessera
