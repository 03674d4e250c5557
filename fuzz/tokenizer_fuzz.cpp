// libFuzzer target for the tokenizers: any bytes must encode to in-range ids without crashing, and valid UTF-8
// text must decode back to itself (SPM and byte-level BPE vocabularies from shared/models/vocab).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>

#include "gguf/gguf_file.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"
#include "util/error.h"

namespace {

std::unique_ptr<tessera::Tokenizer> load(const char* name) {
  const auto file = tessera::gguf::GgufFile::open(std::string(TESSERA_SHARED_DIR) + "/models/vocab/" + name);
  return tessera::Tokenizer::from_metadata(file.metadata());
}

bool valid_utf8(std::string_view text) {
  for (size_t pos = 0; pos < text.size();) {
    const auto cp = tessera::decode_utf8(text, pos);
    if (!cp.valid) return false;
    pos += cp.length;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Loaded once per process: parsing a 50k-token vocabulary per input would starve the fuzzer.
  static const std::unique_ptr<tessera::Tokenizer> vocabs[] = {
      load("ggml-vocab-llama-spm.gguf"), load("ggml-vocab-gpt-2.gguf"), load("ggml-vocab-deepseek-llm.gguf")};
  if (size == 0) return 0;
  const uint8_t control = data[0];
  const auto& tok = *vocabs[control % 3];
  const bool add_special = (control >> 2) & 1;
  const bool parse_special = (control >> 3) & 1;
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  try {
    const auto ids = tok.encode(text, add_special, parse_special);
    for (auto id : ids) {
      if (id < 0 || id >= tok.n_vocab()) std::abort();
    }
    const std::string back = tok.decode(ids);
    const bool plain = !add_special && !parse_special && valid_utf8(text) &&
                       text.find("\xE2\x96\x81") == std::string_view::npos && control % 3 != 2;
    if (plain && back != text) std::abort();
  } catch (const tessera::Error&) {
    // A clear error is an acceptable answer to bad input.
  }
  return 0;
}
