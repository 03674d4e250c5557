// A small self-contained SentencePiece-style vocabulary for synthetic models that have no real tokenizer.
#pragma once

#include <cstdint>

#include "gguf/gguf_value.h"

namespace tessera {

// Writes tokenizer.ggml.* keys: <unk>, <s>, </s>, the 256 byte tokens, then printable pieces up to n_vocab.
// Any text tokenizes (byte fallback) and decodes back exactly. Throws Error when n_vocab < 259.
void write_builtin_vocab(gguf::Metadata& md, int64_t n_vocab);

}  // namespace tessera
