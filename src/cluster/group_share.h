// A group member without the model receives just its share: the head lists the runs of bytes that member's rank
// reads (ModelWeights::share_extents) and streams them; the member keeps them in its --cache under a key naming the
// model, the layout and the rank, so the next start with the same layout sends nothing.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "model/model_weights.h"
#include "net/messages.h"
#include "net/transport.h"

namespace tessera::cluster {

// The key of rank `rank`'s share: the model's identity and the layout (tp, ep, ranks, --tp-shares; a stage's layers).
net::Hash128 share_key(const net::GroupJoin& join);

// The head's side: a rank's table (group_id left 0) and the tensors' bytes the runs index.
struct ShareSource {
  net::ShareTable table;
  std::vector<std::span<const uint8_t>> data;  // by tensor, as table.tensors
  uint64_t bytes = 0;                          // the share's bytes (what the runs add up to)
  uint64_t model_bytes = 0;                    // every tensor's bytes, for the log
};

// Rank spec.rank's share of `weights` (the whole model, or a stage's layers), keyed `key`.
ShareSource share_source(const std::shared_ptr<const ModelWeights>& weights, const ShardSpec& spec,
                         const net::Hash128& key);

// Streams the share as WeightChunks (hash = the key, offset = the place in the run order); returns the bytes sent.
// `cancelled`, asked before each chunk: true stops the stream with an Error (another member's start failed).
uint64_t send_share(net::Connection& link, const ShareSource& share, const std::function<bool()>& cancelled = {});

// Calls fn(bytes) for each run's rows in order: what the share's bytes are, on both sides.
template <class Fn>
void for_each_share_row(const net::ShareTable& table, Fn&& fn) {
  for (const auto& r : table.runs) {
    for (uint64_t i = 0; i < r.count; ++i) fn(r.tensor, r.offset + i * r.stride, r.bytes);
  }
}

}  // namespace tessera::cluster
