// What a head and its workers compare before they split a model between them: a hash that names the model's
// tensors (names, types, shapes) and samples their contents, cheap enough to take at every start.
#pragma once

#include "gguf/gguf_file.h"
#include "net/codec.h"

namespace tessera::cluster {

// XXH3-128 over every tensor's name, type, shape and size, and the first and last 4 KiB of its data: two files that
// agree here are the same model (a fine-tune of the same shapes differs in every tensor's first bytes), without
// reading gigabytes at start.
net::Hash128 model_identity(const gguf::TensorSource& source);

}  // namespace tessera::cluster
