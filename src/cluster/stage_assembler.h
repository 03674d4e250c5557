// Worker side of loading a stage: finds each requested tensor (by content hash) in a local GGUF file (or split
// set, or the same model in the other form) under --models or in the content-addressed --cache, asks the head for the
// rest, and assembles the tensors into a TensorSource the Stage can use.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "gguf/gguf_file.h"
#include "net/messages.h"
#include "util/mapped_file.h"

namespace tessera::cluster {

// Tensors with GGUF metadata, each backed by a mapped file or a buffer it owns.
class AssembledSource : public gguf::TensorSource {
 public:
  AssembledSource(std::string name, std::vector<uint8_t> metadata_gguf);
  AssembledSource(const AssembledSource&) = delete;
  AssembledSource& operator=(const AssembledSource&) = delete;

  void add(const net::TensorInfo& info, std::span<const uint8_t> data, std::shared_ptr<const void> owner);

  const std::string& name() const override { return name_; }
  const gguf::Metadata& metadata() const override { return metadata_file_.metadata(); }
  const std::vector<gguf::TensorInfo>& tensors() const override { return tensors_; }
  const gguf::TensorInfo* find_tensor(std::string_view name) const override;
  std::span<const uint8_t> tensor_data(const gguf::TensorInfo& info) const override;

 private:
  std::string name_;
  std::unique_ptr<std::vector<uint8_t>> metadata_bytes_;  // the parsed file below points into it
  gguf::GgufFile metadata_file_;
  std::vector<gguf::TensorInfo> tensors_;
  std::vector<std::span<const uint8_t>> data_;
  std::vector<std::shared_ptr<const void>> owners_;
  std::unordered_map<std::string, size_t> index_;
};

struct AssemblerOptions {
  std::optional<std::filesystem::path> models_dir;
  std::optional<std::filesystem::path> cache_dir;
};

class StageAssembler {
 public:
  StageAssembler(const net::LoadStage& request, const AssemblerOptions& options);

  // What the worker already has and what the head must send.
  net::LoadReply reply() const;
  uint64_t bytes_needed() const { return bytes_needed_; }
  uint64_t bytes_received() const { return bytes_received_; }
  bool complete() const { return bytes_received_ == bytes_needed_; }
  // Where the tensors found locally came from ("models/x.gguf", "cache"), for the log.
  const std::string& found_in() const { return found_in_; }
  // Why a file of the requested name under --models could not be used (a broken split set, say); empty if none.
  const std::string& local_problem() const { return local_problem_; }

  // Stores a chunk of a needed tensor; throws Error for an unknown hash or a chunk outside the tensor.
  void receive(const net::WeightChunk& chunk);
  // Verifies every received tensor's hash, stores it in the cache (when there is one) and returns the source.
  std::shared_ptr<const gguf::TensorSource> finish();

 private:
  // Tensors with identical content (a tied embedding and head, say) share one transfer.
  struct Pending {
    std::vector<net::TensorInfo> infos;
    std::vector<uint8_t> bytes;
    uint64_t received = 0;
  };

  net::LoadStage request_;
  AssemblerOptions options_;
  std::shared_ptr<AssembledSource> source_;
  std::vector<net::Hash128> have_;
  std::unordered_map<std::string, Pending> pending_;  // by hash hex
  uint64_t bytes_needed_ = 0;
  uint64_t bytes_received_ = 0;
  std::string found_in_;
  std::string local_problem_;
};

}  // namespace tessera::cluster
