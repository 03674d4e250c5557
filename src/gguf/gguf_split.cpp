// Split GGUF sets: part file names and the writer (GgufFile::open reads a set, see gguf_file.cpp).
#include "gguf/gguf_split.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "gguf/gguf_writer.h"
#include "util/error.h"

namespace tessera::gguf {

std::string split_suffix(uint64_t split_no, uint64_t split_count) {
  return fmt::format("-{:05d}-of-{:05d}.gguf", split_no + 1, split_count);
}

std::filesystem::path split_path(const std::filesystem::path& prefix, uint64_t split_no, uint64_t split_count) {
  std::filesystem::path p = prefix;
  p += split_suffix(split_no, split_count);
  return p;
}

std::vector<std::filesystem::path> write_split(const TensorSource& source, const std::filesystem::path& prefix,
                                               uint64_t n_parts, uint64_t alignment) {
  const auto& tensors = source.tensors();
  if (n_parts == 0 || n_parts > kMaxSplitCount) fail("a split set has 1 to {} files, not {}", kMaxSplitCount, n_parts);
  if (n_parts > tensors.size()) {
    fail("{}: cannot split {} tensors into {} files (each file holds at least one)", source.name(), tensors.size(),
         n_parts);
  }
  const auto split_keys = [&](GgufWriter& w, uint64_t no) {
    w.set(kSplitNo, Value(static_cast<uint16_t>(no)));
    w.set(kSplitCount, Value(static_cast<uint16_t>(n_parts)));
    w.set(kSplitTensorsCount, Value(static_cast<int32_t>(tensors.size())));
  };
  std::vector<std::filesystem::path> paths;
  for (uint64_t k = 0; k < n_parts; ++k) {
    GgufWriter w(alignment);
    if (k == 0) {
      for (const auto& [key, value] : source.metadata().entries()) {
        if (key.rfind("split.", 0) != 0) w.set(key, value);
      }
    }
    split_keys(w, k);
    // Rounded up, so the earlier files take the extra tensors as llama.cpp's --split-max-tensors does.
    const size_t begin = static_cast<size_t>((tensors.size() * k + n_parts - 1) / n_parts);
    const size_t end = static_cast<size_t>((tensors.size() * (k + 1) + n_parts - 1) / n_parts);
    for (size_t i = begin; i < end; ++i) {
      const TensorInfo& t = tensors[i];
      w.add_tensor(t.name, t.type, t.ne, [&source, &t](std::span<uint8_t> out) {
        const auto data = source.tensor_data(t);
        std::memcpy(out.data(), data.data(), std::min(out.size(), data.size()));
      });
    }
    paths.push_back(split_path(prefix, k, n_parts));
    w.write(paths.back());
  }
  return paths;
}

}  // namespace tessera::gguf
