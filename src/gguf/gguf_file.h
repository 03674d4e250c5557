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
  uint64_t offset = 0;      // from the start of the data section
  uint64_t n_bytes = 0;
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

class GgufFile : public TensorSource {
 public:
  // Maps the file and validates it completely. Errors name the file, the byte offset and the problem.
  // A file without tensors may end before its aligned data offset (llama.cpp's vocab-only files do).
  static GgufFile open(const std::filesystem::path& path);
  // Parses bytes the caller keeps alive (tests, fuzzing); `name` stands for the file in errors.
  static GgufFile parse(std::span<const uint8_t> bytes, std::string name);

  const std::string& name() const override { return name_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }  // aligned start of the tensor data section
  uint64_t file_size() const { return bytes_.size(); }
  const Metadata& metadata() const override { return metadata_; }
  const std::vector<TensorInfo>& tensors() const override { return tensors_; }

  const TensorInfo* find_tensor(std::string_view name) const override;
  const TensorInfo& tensor(std::string_view name) const;  // throws Error naming the file and tensor
  std::span<const uint8_t> tensor_data(const TensorInfo& info) const override;

 private:
  GgufFile() = default;
  void parse_all();

  MappedFile map_;
  std::span<const uint8_t> bytes_;
  std::string name_;
  uint32_t version_ = 0;
  uint64_t alignment_ = kDefaultAlignment;
  uint64_t data_offset_ = 0;
  Metadata metadata_;
  std::vector<TensorInfo> tensors_;
  std::unordered_map<std::string, size_t, StringHash, std::equal_to<>> tensor_index_;
};

}  // namespace tessera::gguf
