// libFuzzer target for the GGUF reader: any input must either parse or throw tessera::Error; a parsed
// file must be fully readable and must survive a write/read round trip unchanged.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <span>
#include <vector>

#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "util/error.h"

namespace {

using tessera::gguf::GgufFile;
using tessera::gguf::GgufWriter;

// Touches everything the reader handed out, so ASan sees any out-of-bounds view.
uint64_t touch(const GgufFile& f) {
  uint64_t sum = 0;
  for (const auto& [key, value] : f.metadata().entries()) {
    sum += key.size() + value.describe(std::numeric_limits<size_t>::max()).size();
    if (f.metadata().find(key) != &value) std::abort();
  }
  for (const auto& t : f.tensors()) {
    if (f.find_tensor(t.name) != &t) std::abort();
    auto data = f.tensor_data(t);
    if (data.size() != t.n_bytes || t.n_elements() <= 0 || t.rows() <= 0) std::abort();
    for (uint8_t b : data) sum += b;
  }
  return sum;
}

std::vector<uint8_t> rewrite(const GgufFile& f) {
  GgufWriter w(f.alignment());
  w.metadata() = f.metadata();
  for (const auto& t : f.tensors()) {
    auto src = f.tensor_data(t);
    w.add_tensor(t.name, t.type, t.ne, [src](std::span<uint8_t> out) {
      if (out.size() != src.size()) std::abort();
      std::copy(src.begin(), src.end(), out.begin());
    });
  }
  return w.to_bytes();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<uint8_t> first;
  try {
    GgufFile f = GgufFile::parse(std::span<const uint8_t>(data, size), "fuzz.gguf");
    volatile uint64_t sink = touch(f);
    (void)sink;
    // The writer only takes 32-bit alignments; the reader accepts any power of two.
    if (f.alignment() > std::numeric_limits<uint32_t>::max()) return 0;
    first = rewrite(f);
  } catch (const tessera::Error&) {
    return 0;
  }
  // What the reader accepts, the writer must reproduce, and writing is stable: write(read(write(x))) == write(x).
  GgufFile again = GgufFile::parse(first, "rewritten.gguf");
  if (rewrite(again) != first) std::abort();
  return 0;
}
