// GGUF v3 writer: metadata in insertion order, tensors aligned, data streamed one tensor at a time.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "gguf/gguf_value.h"
#include "tensor/ggml_type.h"

namespace tessera::gguf {

class GgufWriter {
 public:
  // Fills exactly the tensor's byte size; called once, in order, while the file is written.
  using Filler = std::function<void(std::span<uint8_t> out)>;

  // alignment: a power of two below 2^32. When it is not 32 and the metadata has no general.alignment,
  // that key (uint32) is appended after the other keys on write; a key that disagrees is an error.
  explicit GgufWriter(uint64_t alignment = 32);

  Metadata& metadata() { return metadata_; }
  void set(std::string key, Value value) { metadata_.set(std::move(key), std::move(value)); }

  // Checks the name is new, the shape valid and the row length a multiple of the type's block.
  void add_tensor(std::string name, GgmlType type, std::vector<int64_t> ne, std::vector<uint8_t> data);
  void add_tensor(std::string name, GgmlType type, std::vector<int64_t> ne, Filler filler);

  // Writes to path atomically (a temporary file renamed into place). Throws Error on I/O failure.
  // Like ggml, each tensor's data is zero-padded to the alignment; with no tensors the file ends
  // right after the header (no padding), as llama.cpp's vocab-only files do.
  void write(const std::filesystem::path& path) const;
  // The whole file in memory (tests and fuzz seeds).
  std::vector<uint8_t> to_bytes() const;

 private:
  struct Pending {
    std::string name;
    GgmlType type;
    std::vector<int64_t> ne;
    uint64_t n_bytes;
    Filler filler;
  };
  template <typename Sink>
  void emit(Sink& sink) const;

  uint64_t alignment_;
  Metadata metadata_;
  std::vector<Pending> tensors_;
};

}  // namespace tessera::gguf
