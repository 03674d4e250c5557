// Split GGUF sets in llama.cpp's gguf-split layout: the key names, the file names, and a writer.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"

namespace tessera::gguf {

// Every file of a set carries these; the first also holds all the model's metadata, later ones only these.
inline constexpr const char* kSplitNo = "split.no";                       // u16, 0-based
inline constexpr const char* kSplitCount = "split.count";                 // u16, files in the set
inline constexpr const char* kSplitTensorsCount = "split.tensors.count";  // i32, tensors in the whole set
inline constexpr uint64_t kMaxSplitCount = 65535;                         // split.count is a u16

// "-00002-of-00003.gguf" for split.no 1 of 3: the end of a part's file name after the set's prefix.
std::string split_suffix(uint64_t split_no, uint64_t split_count);
// PREFIX-00002-of-00003.gguf; prefix may hold a folder.
std::filesystem::path split_path(const std::filesystem::path& prefix, uint64_t split_no, uint64_t split_count);

// Writes source as a set of n_parts files PREFIX-0000k-of-0000n.gguf (llama.cpp's layout: the metadata,
// less any split.* keys, in the first file; tensors in order, as evenly as possible, at least one per file).
// alignment: as GgufWriter's. Returns the paths written, first to last. Throws Error when n_parts is 0 or
// exceeds the tensor count.
std::vector<std::filesystem::path> write_split(const TensorSource& source, const std::filesystem::path& prefix,
                                               uint64_t n_parts, uint64_t alignment = kDefaultAlignment);

}  // namespace tessera::gguf
