// The codecs of the group messages and of LoadStage's group fields (see group_messages.h): the same field
// descriptions drive the encoder and the decoder, as in messages.cpp.
#include "net/group_messages.h"

#include <fmt/format.h>

#include <type_traits>

#include "net/table_fields.h"

namespace tessera::net::group_codec {
namespace {

using field_io::Decoder;
using field_io::Encoder;
using field_io::group_members;
using field_io::kMaxByteCount;
using field_io::run_settings;
using field_io::tensor_table;

template <typename IO, typename M>
void describe(IO& io, M& m) requires std::is_same_v<std::remove_const_t<M>, GroupJoin> {
  io.u64("group_id", m.group_id);
  const size_t n = io.count("n_members", m.members.size(), 2, kMaxGroup, 8);
  group_members(io, "members", m.members, n, 1);
  io.u32("rank", m.rank, 1, static_cast<uint32_t>(n - 1));
  io.string("file_name", m.file_name, 1, kMaxFileName, Charset::FileName);
  io.u64("file_size", m.file_size, kMaxByteCount);
  io.hash("model_hash", m.model_hash);
  io.boolean("tp", m.tp);
  io.boolean("ep", m.ep);
  if (!m.tp && !m.ep) io.bad("tp", "a group is tensor parallel, expert parallel or both");
  io.string("shares", m.shares, 0, kMaxSharesText, Charset::Printable);
  io.f32("ep_redundancy", m.ep_redundancy, 0.0f, 1.0f);
  run_settings(io, m);
  io.boolean("exact_gelu", m.exact_gelu);
  io.boolean("profile", m.profile);
  io.f32("timeout_s", m.timeout_s, 0.1f, 86400.0f);
  io.u32("layer_begin", m.layer_begin, 0, kMaxLayers);
  io.u32("layer_end", m.layer_end, m.layer_begin, kMaxLayers);
}

template <typename IO, typename M>
void describe(IO& io, M& m) requires std::is_same_v<std::remove_const_t<M>, GroupReady> {
  io.u64("group_id", m.group_id);
  io.string("weights_from", m.weights_from, 0, kMaxReason, Charset::Text);
}

template <typename IO, typename M>
void describe(IO& io, M& m) requires std::is_same_v<std::remove_const_t<M>, GroupLink> {
  io.u64("group_id", m.group_id);
  io.u32("rank", m.rank, 1, kMaxGroup - 1);
}

template <typename IO, typename M>
void describe(IO& io, M& m) requires std::is_same_v<std::remove_const_t<M>, CollectiveData> {
  io.u16("op", m.op, 1);
  io.u64("seq", m.seq);
  io.bytes("payload", m.payload, 0, kMaxChunkBytes);
}

template <typename IO, typename M>
void describe(IO& io, M& m) requires std::is_same_v<std::remove_const_t<M>, ShareRequest> {
  io.u64("group_id", m.group_id);
}

template <typename IO, typename M>
void describe(IO& io, M& m) requires std::is_same_v<std::remove_const_t<M>, ShareAccept> {
  io.u64("group_id", m.group_id);
}

template <typename IO, typename M>
void describe(IO& io, M& m) requires std::is_same_v<std::remove_const_t<M>, ShareTable> {
  io.u64("group_id", m.group_id);
  io.hash("key", m.key);
  io.hash("share_hash", m.share_hash);
  io.bytes("model_metadata", m.model_metadata, 0, kMaxModelMetadata);
  const size_t n = io.count("n_tensors", m.tensors.size(), 1, kMaxTensors, 44);
  tensor_table(io, m.tensors, n);
  // Smallest run: tensor 4, offset, bytes, stride and count 8 each.
  const size_t n_runs = io.count("n_runs", m.runs.size(), 0, kMaxShareRuns, 36);
  io.sized("runs", m.runs, n_runs);
  for (size_t i = 0; i < n_runs; ++i) {
    const auto at = static_cast<int64_t>(i);
    auto& r = m.runs[i];
    io.u32(Field("runs", at, "tensor"), r.tensor, 0, static_cast<uint32_t>(n - 1));
    io.u64(Field("runs", at, "offset"), r.offset, kMaxByteCount);
    io.u64(Field("runs", at, "bytes"), r.bytes, kMaxByteCount);
    io.u64(Field("runs", at, "stride"), r.stride, kMaxByteCount);
    io.u64(Field("runs", at, "count"), r.count, kMaxByteCount);
    const uint64_t size = m.tensors[r.tensor].n_bytes;
    // Every run lies inside its tensor: offset + (count - 1) * stride + bytes <= n_bytes, without overflow.
    const bool fits = r.bytes >= 1 && r.count >= 1 && r.stride >= r.bytes && r.offset <= size &&
                      r.bytes <= size - r.offset && (r.count - 1) <= (size - r.offset - r.bytes) / r.stride;
    if (!fits) {
      io.bad(Field("runs", at, "offset"),
             fmt::format("{} runs of {} bytes, {} apart, from {} leave the tensor of {} bytes", r.count, r.bytes,
                         r.stride, r.offset, size));
    }
  }
}

template <typename IO, typename M>
void describe_load_stage_group(IO& io, M& m) {
  const size_t g = io.count("n_group", m.group.size(), 0, kMaxGroup - 1, 8);
  group_members(io, "group", m.group, g, 0);
  io.hash("model_hash", m.model_hash);
  io.boolean("group_tp", m.group_tp);
  io.boolean("group_ep", m.group_ep);
  if (g > 0 && !m.group_tp && !m.group_ep) io.bad("group_tp", "a group is tensor parallel, expert parallel or both");
  io.f32("group_timeout_s", m.group_timeout_s, 0.1f, 86400.0f);
  io.string("group_shares", m.group_shares, 0, kMaxSharesText, Charset::Printable);
  if (g == 0 && !m.group_shares.empty()) io.bad("group_shares", "a stage without a group has no shares");
  io.f32("group_ep_redundancy", m.group_ep_redundancy, 0.0f, 1.0f);
}

}  // namespace

#define TESSERA_GROUP_CODEC(M)                              \
  void fields(Encoder& io, const M& m) { describe(io, m); } \
  void fields(Decoder& io, M& m) { describe(io, m); }
TESSERA_GROUP_CODEC(GroupJoin)
TESSERA_GROUP_CODEC(GroupReady)
TESSERA_GROUP_CODEC(GroupLink)
TESSERA_GROUP_CODEC(CollectiveData)
TESSERA_GROUP_CODEC(ShareRequest)
TESSERA_GROUP_CODEC(ShareAccept)
TESSERA_GROUP_CODEC(ShareTable)
#undef TESSERA_GROUP_CODEC

void load_stage_group(Encoder& io, const LoadStage& m) { describe_load_stage_group(io, m); }
void load_stage_group(Decoder& io, LoadStage& m) { describe_load_stage_group(io, m); }

}  // namespace tessera::net::group_codec
