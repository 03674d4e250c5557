// Validating GGUF (v2, v3) reader: parses and checks the whole header, then maps tensor data in place.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "gguf/gguf_value.h"
#include "tensor/ggml_type.h"
#include "util/mapped_file.h"

namespace tessera::gguf {

inline constexpr uint64_t kDefaultAlignment = 32;
inline constexpr int kMaxDims = 4;

// Sanity limits, far above any real model; every count is also checked against the bytes left in
// the file before anything is allocated for it.
inline constexpr uint64_t kMaxTensorCount = uint64_t{1} << 20;
inline constexpr uint64_t kMaxKvCount = uint64_t{1} << 20;
inline constexpr uint64_t kMaxStringLength = uint64_t{1} << 28;  // 256 MiB
inline constexpr uint64_t kMaxArrayLength = uint64_t{1} << 26;   // elements
inline constexpr int kMaxArrayDepth = 8;                         // nested arrays (bounds the recursion)

// Unlike ggml, a tensor must have 1..4 dimensions of at least 1 element each: an empty tensor has no
// use in a model, and allowing a 0 would hide an overflowing product of the other dimensions.
struct TensorInfo {
  std::string name;
  GgmlType type = GgmlType::F32;
  std::vector<int64_t> ne;  // GGUF order: ne[0] is the contiguous (row) dimension; 1..4 entries
  uint64_t offset = 0;      // from the start of the data section (of the file that holds it)
  uint64_t n_bytes = 0;
  uint32_t part = 0;  // the file of a split set that holds the data: 0 for the first (or only) file
  int64_t n_elements() const;
  int64_t rows() const;  // product of ne[1..]
};

// Named tensors with GGUF metadata: a GGUF file, or (on a worker) tensors assembled from a cache or a stream.
class TensorSource {
 public:
  virtual ~TensorSource() = default;
  virtual const std::string& name() const = 0;  // stands for the source in error messages
  virtual const Metadata& metadata() const = 0;
  virtual const std::vector<TensorInfo>& tensors() const = 0;
  virtual const TensorInfo* find_tensor(std::string_view name) const = 0;
  virtual std::span<const uint8_t> tensor_data(const TensorInfo& info) const = 0;
};

// One GGUF file, or a split set (llama.cpp's gguf-split layout, see docs/gguf-split.md) seen as one file.
class GgufFile : public TensorSource {
 public:
  // Maps the file and validates it completely. Errors name the file, the byte offset and the problem.
  // A file without tensors may end before its aligned data offset (llama.cpp's vocab-only files do).
  // The first file of a split set (split.count > 1, named PREFIX-00001-of-0000N.gguf) opens the whole set
  // from its folder: metadata() is the first file's without the split.* keys, tensors() those of every
  // part in order. A missing, duplicated or mismatched part is an Error naming it, and so is a later part
  // given directly (the message names the first file).
  static GgufFile open(const std::filesystem::path& path);
  // Parses one file's bytes the caller keeps alive (tests, fuzzing); `name` stands for the file in errors.
  // Never opens other files: split.* keys are kept in the metadata as they are.
  static GgufFile parse(std::span<const uint8_t> bytes, std::string name);

  const std::string& name() const override { return name_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return parts_.front().data_offset; }  // the first file's aligned tensor data start
  uint64_t file_size() const;                                          // bytes of every file of the set together
  const Metadata& metadata() const override { return metadata_; }

  // The files of a split set (one for a plain file): path (or parse()'s name) and size.
  size_t n_parts() const { return parts_.size(); }
  const std::string& part_name(size_t part) const { return parts_.at(part).name; }
  uint64_t part_size(size_t part) const { return parts_.at(part).bytes.size(); }
  const std::vector<TensorInfo>& tensors() const override { return tensors_; }

  const TensorInfo* find_tensor(std::string_view name) const override;
  const TensorInfo& tensor(std::string_view name) const;  // throws Error naming the file and tensor
  std::span<const uint8_t> tensor_data(const TensorInfo& info) const override;

 private:
  struct Part {
    MappedFile map;  // empty for parse()
    std::span<const uint8_t> bytes;
    std::string name;
    uint64_t data_offset = 0;
  };

  GgufFile() = default;
  static GgufFile open_one(const std::filesystem::path& path);
  void parse_all();  // parses parts_.front()
  void open_other_parts(const std::filesystem::path& first);

  std::vector<Part> parts_;
  std::string name_;
  uint32_t version_ = 0;
  uint64_t alignment_ = kDefaultAlignment;
  Metadata metadata_;
  std::vector<TensorInfo> tensors_;
  std::unordered_map<std::string, size_t, StringHash, std::equal_to<>> tensor_index_;
};

}  // namespace tessera::gguf
