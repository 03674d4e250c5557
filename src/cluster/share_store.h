// A group member's copy of its share: the model's tensors laid out whole in one image where only the share's runs
// hold bytes (the rest are never written, never read: holes in the cache file, untouched pages without one). The
// image lives in --cache as share-KEY.bin beside share-KEY.table (the ShareTable, written last, once the bytes are
// checked), so the next start with the same layout maps it and asks for nothing.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>

#include "gguf/gguf_file.h"
#include "net/codec.h"
#include "net/messages.h"

namespace tessera::cluster {

// The share kept under `key` in `cache_dir`, checked against its table's hash; nullptr when there is none (or it is
// damaged: then `problem` says why, and it is received again).
std::shared_ptr<const gguf::TensorSource> cached_share(const std::filesystem::path& cache_dir, const net::Hash128& key,
                                                       const std::string& name, std::string& problem);

class ShareReceiver {
 public:
  // Lays the image out; it is made (a sparse file in cache_dir, or anonymous memory without one) with the first
  // chunk, so the caller admits bytes_needed() before anything is allocated.
  ShareReceiver(net::ShareTable table, std::optional<std::filesystem::path> cache_dir, std::string name);
  ~ShareReceiver();
  ShareReceiver(const ShareReceiver&) = delete;
  ShareReceiver& operator=(const ShareReceiver&) = delete;

  uint64_t bytes_needed() const { return needed_; }
  uint64_t bytes_received() const { return received_; }
  bool complete() const { return received_ == needed_; }
  // The next piece in run order; throws Error for a chunk of another share, out of order or past the end.
  void receive(const net::WeightChunk& chunk);
  // Checks the hash, writes the table into the cache (when there is one) and returns the tensors.
  std::shared_ptr<const gguf::TensorSource> finish();

 private:
  struct Image;
  void open_image();
  net::ShareTable table_;
  std::optional<std::filesystem::path> cache_dir_;
  std::string name_;
  std::vector<uint64_t> place_;  // each tensor's offset in the image
  uint64_t needed_ = 0;
  uint64_t received_ = 0;
  size_t run_ = 0;  // where the next byte goes: run, row of it, byte of the row
  uint64_t row_ = 0;
  uint64_t in_row_ = 0;
  net::ContentHasher hasher_;
  std::unique_ptr<Image> image_;
};

}  // namespace tessera::cluster
