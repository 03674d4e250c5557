// Field descriptions shared by several messages' codecs (messages.cpp, group_messages.cpp): a tensor table, a
// group's member list and the run settings of a stage or group member. Private to net.
#pragma once

#include <fmt/format.h>

#include <string_view>
#include <unordered_set>

#include "net/field_io.h"
#include "net/messages.h"

namespace tessera::net::field_io {

template <typename IO, typename T>
void tensor_fields(IO& io, T& t, int64_t i) {
  io.string(Field("tensors", i, "name"), t.name, 1, kMaxTensorName, Charset::TensorName);
  io.hash(Field("tensors", i, "hash"), t.hash);
  io.u64(Field("tensors", i, "n_bytes"), t.n_bytes, kMaxByteCount);
  io.enumeration(Field("tensors", i, "type"), t.type);
  const size_t n_dims = io.count(Field("tensors", i, "n_dims"), t.shape.size(), 1, kMaxDims, 8);
  io.sized(Field("tensors", i, "shape"), t.shape, n_dims);
  const TypeTraits& traits = type_traits(t.type);
  uint64_t elements = 1;
  for (size_t d = 0; d < n_dims; ++d) {
    io.u64(Field("tensors", i, "shape"), t.shape[d], kMaxByteCount);
    if (t.shape[d] == 0) io.bad(Field("tensors", i, "shape"), fmt::format("dimension {} is 0", d));
    if (elements > kMaxByteCount / t.shape[d]) io.bad(Field("tensors", i, "shape"), "too many elements");
    elements *= t.shape[d];
  }
  const auto block = static_cast<uint64_t>(traits.block_size);
  if (t.shape[0] % block != 0) {
    io.bad(Field("tensors", i, "shape"),
           fmt::format("ne[0] = {} is not a multiple of {}'s block size {}", t.shape[0], traits.name, block));
  }
  const uint64_t expected = elements / block * traits.type_size;
  if (t.n_bytes != expected) {
    io.bad(Field("tensors", i, "n_bytes"),
           fmt::format("{} bytes, but a {} tensor of {} elements has {}", t.n_bytes, traits.name, elements, expected));
  }
}

// n tensor entries, each name once.
template <typename IO, typename V>
void tensor_table(IO& io, V& tensors, size_t n) {
  io.sized("tensors", tensors, n);
  std::unordered_set<std::string_view> names;
  for (size_t i = 0; i < n; ++i) {
    tensor_fields(io, tensors[i], static_cast<int64_t>(i));
    if (!names.insert(tensors[i].name).second) {
      io.bad(Field("tensors", static_cast<int64_t>(i), "name"), fmt::format("'{}' appears twice", tensors[i].name));
    }
  }
}

// n group members by rank; an address may be empty only before `first_address` (the head: it dials, never listens).
template <typename IO, typename V>
void group_members(IO& io, const char* what, V& members, size_t n, size_t first_address) {
  io.sized(what, members, n);
  for (size_t i = 0; i < n; ++i) {
    const auto at = static_cast<int64_t>(i);
    io.string(Field(what, at, "name"), members[i].name, 1, kMaxNodeName, Charset::NodeName);
    io.string(Field(what, at, "address"), members[i].address, i < first_address ? 0 : 1, kMaxAddress,
              Charset::Printable);
  }
}

// The slots, context, KV cache type (f16 or f32), wire type and threads a stage (LoadStage) or a group member
// (GroupJoin) runs with, in this order on the wire.
template <typename IO, typename M>
void run_settings(IO& io, M& m) {
  io.u32("n_slots", m.n_slots, 1, kMaxSlots);
  io.u32("n_ctx", m.n_ctx, 1, kMaxCtx);
  io.enumeration("kv_type", m.kv_type);
  if (m.kv_type != GgmlType::F16 && m.kv_type != GgmlType::F32) {
    io.bad("kv_type", fmt::format("{} is not a KV cache type (f16 or f32)", type_name(m.kv_type)));
  }
  io.enumeration("wire_type", m.wire_type);
  io.u16("threads", m.threads);
  if (m.threads > kMaxThreads) io.bad("threads", fmt::format("{} exceeds the limit {}", m.threads, kMaxThreads));
}

}  // namespace tessera::net::field_io
