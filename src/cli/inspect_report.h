// Everything `tessera inspect` knows about a GGUF file, as one JSON document (the text view renders it).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "gguf/gguf_file.h"
#include "tensor/ggml_type.h"

namespace tessera {

struct InspectOptions {
  int64_t n_ctx = 0;  // 0: the model's training context, capped at 4096
  GgmlType kv_type = GgmlType::F16;
};

nlohmann::json inspect_report(const gguf::GgufFile& file, const InspectOptions& options);
// The tensors whose names match `pattern` (an ECMAScript regex found anywhere in the name), with the file facts.
// A bad pattern is an Error.
nlohmann::json inspect_tensors_report(const gguf::GgufFile& file, const std::string& pattern);

}  // namespace tessera
