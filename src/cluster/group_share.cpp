// share_source / send_share: the head reads only the runs of a rank's share from its mapped file, hashes them for
// the member to check, and sends them in run order.
#include "cluster/group_share.h"

#include <algorithm>
#include <unordered_map>

#include "gguf/gguf_writer.h"
#include "util/error.h"

namespace tessera::cluster {
namespace {

constexpr size_t kChunkBytes = 4u << 20;

// The model's key/value metadata, tokenizer included (the member builds one), as a GGUF file without tensors.
std::vector<uint8_t> share_metadata(const ModelWeights& model) {
  gguf::GgufWriter w;
  for (const auto& [key, value] : model.source().metadata().entries()) w.set(key, value);
  const auto& c = model.config();
  w.set(c.arch_name + ".vocab_size", gguf::Value(static_cast<uint32_t>(c.n_vocab)));
  return w.to_bytes();
}

}  // namespace

net::Hash128 share_key(const net::GroupJoin& join) {
  std::string layout = fmt::format("share v1 tp={} ep={} ranks={} shares={} rank={}", join.tp, join.ep,
                                   join.members.size(), join.shares, join.rank);
  // A --place stage's share is of its layers only: another split is another share.
  // The experts' copies change an --ep share's contents.
  if (join.ep) layout += fmt::format(" ep_redundancy={:g}", join.ep_redundancy);
  if (join.layer_end > 0) layout += fmt::format(" layers={}-{}", join.layer_begin, join.layer_end);
  std::vector<uint8_t> bytes(join.model_hash.begin(), join.model_hash.end());
  bytes.insert(bytes.end(), layout.begin(), layout.end());
  return net::content_hash(bytes);
}

ShareSource share_source(const std::shared_ptr<const ModelWeights>& weights, const ShardSpec& spec,
                         const net::Hash128& key) {
  ShareSource s;
  net::ShareTable& t = s.table;
  t.key = key;
  t.model_metadata = share_metadata(*weights);
  const gguf::TensorSource& source = weights->source();
  std::unordered_map<std::string, uint32_t> index;
  for (const auto& g : source.tensors()) {
    net::TensorInfo info;
    info.name = g.name;
    info.type = g.type;
    info.n_bytes = g.n_bytes;
    for (auto d : g.ne) info.shape.push_back(static_cast<uint64_t>(d));
    index[g.name] = static_cast<uint32_t>(t.tensors.size());
    t.tensors.push_back(std::move(info));
    s.data.push_back(source.tensor_data(g));
    s.model_bytes += g.n_bytes;
  }
  for (const ShareExtent& e : ModelWeights::share_extents(weights, spec)) {
    t.runs.push_back({index.at(e.tensor), e.offset, e.bytes, e.stride, e.count});
    s.bytes += e.bytes * e.count;
  }
  net::ContentHasher hasher;
  for_each_share_row(
      t, [&](uint32_t tensor, uint64_t offset, uint64_t n) { hasher.update(s.data[tensor].subspan(offset, n)); });
  t.share_hash = hasher.digest();
  return s;
}

uint64_t send_share(net::Connection& link, const ShareSource& share, const std::function<bool()>& cancelled) {
  net::WeightChunk chunk;
  chunk.hash = share.table.key;
  uint64_t sent = 0;
  const auto flush = [&] {
    if (chunk.data.empty()) return;
    if (cancelled && cancelled()) fail("the share's stream was stopped after {} bytes", sent);
    link.send(chunk);
    sent += chunk.data.size();
    chunk.offset = sent;
    chunk.data.clear();
  };
  for_each_share_row(share.table, [&](uint32_t tensor, uint64_t offset, uint64_t n) {
    const auto bytes = share.data[tensor].subspan(offset, n);
    for (size_t at = 0; at < bytes.size();) {
      const size_t take = std::min(bytes.size() - at, kChunkBytes - chunk.data.size());
      chunk.data.insert(chunk.data.end(), bytes.begin() + static_cast<std::ptrdiff_t>(at),
                        bytes.begin() + static_cast<std::ptrdiff_t>(at + take));
      at += take;
      if (chunk.data.size() == kChunkBytes) flush();
    }
  });
  flush();
  return sent;
}

}  // namespace tessera::cluster
