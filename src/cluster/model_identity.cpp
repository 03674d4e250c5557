// model_identity: the tensors' table and samples of their bytes, hashed together in file order.
#include "cluster/model_identity.h"

#include <algorithm>
#include <cstring>

namespace tessera::cluster {

net::Hash128 model_identity(const gguf::TensorSource& source) {
  constexpr size_t kSample = 4096;
  std::vector<uint8_t> bytes;
  const auto put = [&](const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    bytes.insert(bytes.end(), b, b + n);
  };
  for (const auto& t : source.tensors()) {
    put(t.name.data(), t.name.size() + 1);
    const auto type = static_cast<uint32_t>(t.type);
    put(&type, sizeof type);
    for (int64_t d : t.ne) put(&d, sizeof d);
    put(&t.n_bytes, sizeof t.n_bytes);
    const auto data = source.tensor_data(t);
    const size_t head = std::min(kSample, data.size());
    put(data.data(), head);
    const size_t tail = std::min(kSample, data.size() - head);
    put(data.data() + data.size() - tail, tail);
  }
  return net::content_hash(bytes);
}

}  // namespace tessera::cluster
