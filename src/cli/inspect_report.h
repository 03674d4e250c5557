// Everything `tessera inspect` knows about a GGUF file, as one JSON document (the text view renders it).
#pragma once

#include <nlohmann/json.hpp>

#include "gguf/gguf_file.h"
#include "tensor/ggml_type.h"

namespace tessera {

struct InspectOptions {
  int64_t n_ctx = 0;  // 0: the model's training context, capped at 4096
  GgmlType kv_type = GgmlType::F16;
};

nlohmann::json inspect_report(const gguf::GgufFile& file, const InspectOptions& options);

}  // namespace tessera
