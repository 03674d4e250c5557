// Wire messages: one field description per message drives both the encoder and the decoder, so the two cannot
// drift apart and every validation the receiver makes also stops a sender from emitting a bad message.
#include "net/messages.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "net/field_io.h"
#include "net/group_messages.h"
#include "net/table_fields.h"
#include "util/error.h"

namespace tessera::net {
namespace {

using field_io::Decoder;
using field_io::Encoder;
using field_io::kFloatMax;
using field_io::kMaxByteCount;
using field_io::kTypeOf;
using field_io::run_settings;
using field_io::tensor_table;

// ---- Field descriptions (M is the message, const when encoding) ----

template <typename IO, typename M>
void fields(IO& io, M& m) requires std::is_same_v<std::remove_const_t<M>, Hello> {
  io.u16("protocol_version", m.protocol_version, 1);
  io.enumeration("role", m.role);
  io.string("node_name", m.node_name, 1, kMaxNodeName, Charset::NodeName);
  io.string("software_version", m.software_version, 0, kMaxVersionText, Charset::Printable);
}

template <typename IO, typename M>
void fields(IO& io, M& m) requires std::is_same_v<std::remove_const_t<M>, HelloAck> {
  io.enumeration("status", m.status);
  io.u16("protocol_version", m.protocol_version, 1);
  io.string("node_name", m.node_name, 1, kMaxNodeName, Charset::NodeName);
  io.string("software_version", m.software_version, 0, kMaxVersionText, Charset::Printable);
  io.string("reason", m.reason, m.status == HelloStatus::Accepted ? 0 : 1, kMaxReason, Charset::Text);
}

template <typename IO, typename M>
void fields(IO& /*io*/, M& /*m*/) requires std::is_same_v<std::remove_const_t<M>, Heartbeat> {}

template <typename IO, typename M>
void fields(IO& io, M& m) requires std::is_same_v<std::remove_const_t<M>, Ping> {
  io.u64("id", m.id);
  io.u32("reply_bytes", m.reply_bytes, 0, kMaxPingBytes);
  io.bytes("payload", m.payload, 0, kMaxPingBytes);
}

template <typename IO, typename M>
void fields(IO& io, M& m) requires std::is_same_v<std::remove_const_t<M>, Pong> {
  io.u64("id", m.id);
  io.bytes("payload", m.payload, 0, kMaxPingBytes);
}

template <typename IO, typename M>
void fields(IO& io, M& m) requires std::is_same_v<std::remove_const_t<M>, ErrorMsg> {
  io.enumeration("code", m.code);
  io.string("message", m.message, 1, kMaxErrorText, Charset::Text);
  io.u64("request_id", m.request_id);
}

template <typename IO, typename M>
void fields(IO& io, M& m) requires std::is_same_v<std::remove_const_t<M>, Bye> {
  io.string("reason", m.reason, 0, kMaxReason, Charset::Text);
}

template <typename IO, typename M>
void fields(IO& io, M& m) requires std::is_same_v<std::remove_const_t<M>, LoadStage> {
  io.string("file_name", m.file_name, 1, kMaxFileName, Charset::FileName);
  io.u64("file_size", m.file_size, kMaxByteCount);
  io.string("model_name", m.model_name, 0, kMaxModelName, Charset::Text);
  io.bytes("model_metadata", m.model_metadata, 0, kMaxModelMetadata);
  // Smallest tensor entry: name length 4, hash 16, n_bytes 8, type 4, n_dims 4, one dimension 8.
  const size_t n = io.count("n_tensors", m.tensors.size(), 0, kMaxTensors, 44);
  tensor_table(io, m.tensors, n);
  io.u32("layer_begin", m.layer_begin, 0, kMaxLayers);
  io.u32("layer_end", m.layer_end, m.layer_begin, kMaxLayers);
  io.boolean("has_embedding", m.has_embedding);
  io.boolean("has_head", m.has_head);
  if (m.layer_end == m.layer_begin && !m.has_embedding && !m.has_head) {
    io.bad("layer_end", "the stage holds no layer, no embedding and no head");
  }
  run_settings(io, m);
  io.u32("max_batch", m.max_batch, 1, kMaxBatchTokens);
  group_codec::load_stage_group(io, m);
}

template <typename IO, typename V>
void hash_list(IO& io, const char* name, V& hashes) {
  const size_t n = io.count(name, hashes.size(), 0, kMaxTensors, 16);
  io.sized(name, hashes, n);
  for (size_t i = 0; i < n; ++i) io.hash(Field(name, static_cast<int64_t>(i)), hashes[i]);
}

template <typename IO, typename M>
void fields(IO& io, M& m) requires std::is_same_v<std::remove_const_t<M>, LoadReply> {
  hash_list(io, "have", m.have);
  hash_list(io, "need", m.need);
}

template <typename IO, typename M>
void fields(IO& io, M& m) requires std::is_same_v<std::remove_const_t<M>, WeightChunk> {
  io.hash("hash", m.hash);
  io.u64("offset", m.offset, kMaxByteCount);
  io.bytes("data", m.data, 1, kMaxChunkBytes);
}

template <typename IO, typename M>
void fields(IO& io, M& m) requires std::is_same_v<std::remove_const_t<M>, LoadProgress> {
  io.u64("bytes_done", m.bytes_done, kMaxByteCount);
  io.u64("bytes_total", m.bytes_total, kMaxByteCount);
  if (m.bytes_done > m.bytes_total) {
    io.bad("bytes_done", fmt::format("{} exceeds bytes_total {}", m.bytes_done, m.bytes_total));
  }
}

template <typename IO, typename M>
void fields(IO& io, M& m) requires std::is_same_v<std::remove_const_t<M>, LoadDone> {
  io.u64("weights_bytes", m.weights_bytes, kMaxByteCount);
  io.u64("kv_bytes", m.kv_bytes, kMaxByteCount);
  io.u64("buffer_bytes", m.buffer_bytes, kMaxByteCount);
  const size_t n = io.count("n_batch_times", m.batch_times.size(), 0, kMaxBatchTimes, 8);
  io.sized("batch_times", m.batch_times, n);
  for (size_t i = 0; i < n; ++i) {
    auto& t = m.batch_times[i];
    const auto at = static_cast<int64_t>(i);
    io.u32(Field("batch_times", at, "tokens"), t.tokens, 1, kMaxBatchTokens);
    io.f32(Field("batch_times", at, "seconds"), t.seconds, 0.0f, kMaxBatchSeconds);
    if (i > 0 && t.tokens <= m.batch_times[i - 1].tokens) {
      io.bad(Field("batch_times", at, "tokens"),
             fmt::format("{} does not follow {}: the sizes must increase", t.tokens, m.batch_times[i - 1].tokens));
    }
  }
}

// A matrix; n_rows is fixed by the message when rows_must_be is set.
template <typename IO, typename A>
void activation_fields(IO& io, const char* name, A& a, uint32_t max_cols, std::optional<uint32_t> rows_must_be) {
  io.enumeration(Field(name, -1, "type"), a.type);
  io.u32(Field(name, -1, "n_rows"), a.n_rows, rows_must_be.value_or(1), rows_must_be.value_or(kMaxBatchTokens));
  io.u32(Field(name, -1, "n_cols"), a.n_cols, 1, max_cols);
  const uint64_t n_bytes = uint64_t{a.n_rows} * a.n_cols * wire_type_size(a.type);
  io.bytes_exact(Field(name, -1, "data"), a.data, n_bytes, kMaxChunkBytes);
}

template <typename IO, typename S>
void sampling_fields(IO& io, S& s, int64_t i) {
  io.i32(Field("sampling", i, "seq"), s.seq, 0, kMaxSeq - 1);
  io.f32(Field("sampling", i, "temperature"), s.temperature, -kFloatMax, kFloatMax);
  io.i32(Field("sampling", i, "top_k"), s.top_k, -1, std::numeric_limits<int32_t>::max());
  io.f32(Field("sampling", i, "top_p"), s.top_p, 0.0f, 1.0f);
  if (s.top_p == 0.0f) io.bad(Field("sampling", i, "top_p"), "0 is outside (0, 1]");
  io.f32(Field("sampling", i, "min_p"), s.min_p, 0.0f, 1.0f);
  io.f32(Field("sampling", i, "repeat_penalty"), s.repeat_penalty, 0.0f, kFloatMax);
  if (s.repeat_penalty == 0.0f) io.bad(Field("sampling", i, "repeat_penalty"), "must be > 0");
  io.i32(Field("sampling", i, "repeat_last_n"), s.repeat_last_n, -1, std::numeric_limits<int32_t>::max());
  io.f32(Field("sampling", i, "presence_penalty"), s.presence_penalty, -kFloatMax, kFloatMax);
  io.f32(Field("sampling", i, "frequency_penalty"), s.frequency_penalty, -kFloatMax, kFloatMax);
  io.u64(Field("sampling", i, "seed"), s.seed);
  // 0xFFFFFFFF means "pick a random seed" to a Sampler: the sampling stage must use the head's seed instead.
  if (s.seed == 0xFFFFFFFFu) io.bad(Field("sampling", i, "seed"), "0xFFFFFFFF (random) must be resolved by the head");
  io.u64(Field("sampling", i, "draws"), s.draws);
  // The window holds at most repeat_last_n tokens (-1: the whole sequence); 0 turns penalties off.
  const size_t max_history = s.repeat_last_n < 0 ? kMaxCtx : static_cast<size_t>(s.repeat_last_n);
  const size_t n_history = io.count(Field("sampling", i, "n_history"), s.history.size(), 0, max_history, 4);
  io.sized(Field("sampling", i, "history"), s.history, n_history);
  for (size_t k = 0; k < n_history; ++k) {
    io.i32(Field("sampling", i, "history"), s.history[k], 0, static_cast<int32_t>(kMaxVocab) - 1);
  }
  io.boolean(Field("sampling", i, "logprobs"), s.logprobs);
  io.u16(Field("sampling", i, "top_logprobs"), s.top_logprobs);
  if (s.top_logprobs > kMaxLogprobs) {
    io.bad(Field("sampling", i, "top_logprobs"), fmt::format("{} exceeds the limit {}", s.top_logprobs, kMaxLogprobs));
  }
  if (!s.logprobs && s.top_logprobs != 0) io.bad(Field("sampling", i, "top_logprobs"), "given but logprobs is 0");
  io.string(Field("sampling", i, "grammar"), s.grammar, 0, kMaxGrammarBytes, Charset::Text);
  const size_t n_grammar = io.count(Field("sampling", i, "n_grammar_tokens"), s.grammar_tokens.size(), 0,
                                    s.grammar.empty() ? 0 : kMaxCtx, 4);
  io.sized(Field("sampling", i, "grammar_tokens"), s.grammar_tokens, n_grammar);
  for (size_t k = 0; k < n_grammar; ++k) {
    io.i32(Field("sampling", i, "grammar_tokens"), s.grammar_tokens[k], 0, static_cast<int32_t>(kMaxVocab) - 1);
  }
}

template <typename IO, typename M>
void fields(IO& io, M& m) requires std::is_same_v<std::remove_const_t<M>, Forward> {
  io.u64("request_id", m.request_id);
  // Smallest token: seq 4, pos 4, want_output 1.
  const size_t n = io.count("n_tokens", m.seq.size(), 1, kMaxBatchTokens, 9);
  io.sized("seq", m.seq, n);
  io.sized("pos", m.pos, n);
  io.sized("want_output", m.want_output, n);
  for (size_t i = 0; i < n; ++i) io.i32(Field("seq", static_cast<int64_t>(i)), m.seq[i], 0, kMaxSeq - 1);
  for (size_t i = 0; i < n; ++i)
    io.i32(Field("pos", static_cast<int64_t>(i)), m.pos[i], 0, static_cast<int32_t>(kMaxCtx) - 1);
  for (size_t i = 0; i < n; ++i) io.flag(Field("want_output", static_cast<int64_t>(i)), m.want_output[i]);
  bool has_tokens = !m.tokens.empty();
  io.boolean("has_tokens", has_tokens);
  io.sized("tokens", m.tokens, has_tokens ? n : 0);
  for (size_t i = 0; i < m.tokens.size(); ++i) {
    io.i32(Field("tokens", static_cast<int64_t>(i)), m.tokens[i], 0, static_cast<int32_t>(kMaxVocab) - 1);
  }
  io.optional("activations", m.activations,
              [&](auto& a) { activation_fields(io, "activations", a, kMaxEmbd, static_cast<uint32_t>(n)); });
  if (!has_tokens && !m.activations) io.bad("has_tokens", "a Forward needs tokens or activations");
  // Smallest entry: 4 x 9 numbers + seed 8 + draws 8 + n_history 4 + logprobs 1 + top_logprobs 2 + grammar 4 +
  // n_grammar_tokens 4.
  const size_t n_sampling = io.count("n_sampling", m.sampling.size(), 0, n, 67);
  io.sized("sampling", m.sampling, n_sampling);
  for (size_t i = 0; i < n_sampling; ++i) {
    const auto idx = static_cast<int64_t>(i);
    sampling_fields(io, m.sampling[i], idx);
    bool output = false;
    for (size_t t = 0; t < n && !output; ++t) output = m.seq[t] == m.sampling[i].seq && m.want_output[t] != 0;
    if (!output) {
      io.bad(Field("sampling", idx, "seq"),
             fmt::format("sequence {} has no output token in this batch", m.sampling[i].seq));
    }
    for (size_t k = 0; k < i; ++k) {
      if (m.sampling[k].seq == m.sampling[i].seq) {
        io.bad(Field("sampling", idx, "seq"), fmt::format("sequence {} has two entries", m.sampling[i].seq));
      }
    }
  }
}

template <typename IO, typename S>
void sampled_fields(IO& io, S& s, int64_t i) {
  io.i32(Field("sampled", i, "seq"), s.seq, 0, kMaxSeq - 1);
  io.i32(Field("sampled", i, "token"), s.token, 0, static_cast<int32_t>(kMaxVocab) - 1);
  io.boolean(Field("sampled", i, "has_logprob"), s.has_logprob);
  io.logprob(Field("sampled", i, "logprob"), s.logprob);
  const size_t n_top = io.count(Field("sampled", i, "n_top"), s.top.size(), 0, kMaxLogprobs, 8);
  io.sized(Field("sampled", i, "top"), s.top, n_top);
  for (size_t k = 0; k < n_top; ++k) {
    io.i32(Field("sampled", i, "top.token"), s.top[k].token, 0, static_cast<int32_t>(kMaxVocab) - 1);
    io.logprob(Field("sampled", i, "top.logprob"), s.top[k].logprob);
  }
  // One encoding per meaning: without logprobs the fields stay zero.
  if (!s.has_logprob && (s.logprob != 0.0f || n_top != 0)) {
    io.bad(Field("sampled", i, "has_logprob"), "logprobs are given but has_logprob is 0");
  }
}

template <typename IO, typename M>
void fields(IO& io, M& m) requires std::is_same_v<std::remove_const_t<M>, ForwardResult> {
  io.u64("request_id", m.request_id);
  io.optional("hidden", m.hidden, [&](auto& a) { activation_fields(io, "hidden", a, kMaxEmbd, std::nullopt); });
  io.optional("logits", m.logits, [&](auto& a) { activation_fields(io, "logits", a, kMaxVocab, std::nullopt); });
  // Smallest entry: seq 4, token 4, has_logprob 1, logprob 4, n_top 4.
  const size_t n = io.count("n_sampled", m.sampled.size(), 0, kMaxBatchTokens, 17);
  io.sized("sampled", m.sampled, n);
  for (size_t i = 0; i < n; ++i) sampled_fields(io, m.sampled[i], static_cast<int64_t>(i));
  if (m.hidden && (m.logits || n > 0)) io.bad("hidden", "a result holds hidden states or outputs, not both");
}

template <typename IO, typename M>
void fields(IO& io, M& m) requires std::is_same_v<std::remove_const_t<M>, ClearSequence> {
  io.i32("seq", m.seq, 0, kMaxSeq - 1);
}

template <typename IO, typename M>
void fields(IO& io, M& m) requires std::is_same_v<std::remove_const_t<M>, TruncateSequence> {
  io.i32("seq", m.seq, 0, kMaxSeq - 1);
  io.i32("n", m.n, 0, static_cast<int32_t>(kMaxCtx));
}

template <typename IO, typename M>
void fields(IO& io, M& m) requires std::is_same_v<std::remove_const_t<M>, ProbeRequest> {
  io.f32("seconds", m.seconds, 0.05f, 60.0f);
  io.u32("max_age_s", m.max_age_s, 0, 86400);
  const size_t n = io.count("n_peers", m.peers.size(), 0, kMaxGroup, 8);
  io.sized("peers", m.peers, n);
  for (size_t i = 0; i < n; ++i) {
    const auto at = static_cast<int64_t>(i);
    io.string(Field("peers", at, "name"), m.peers[i].name, 1, kMaxNodeName, Charset::NodeName);
    io.string(Field("peers", at, "address"), m.peers[i].address, 1, kMaxAddress, Charset::Printable);
  }
}

template <typename IO, typename M>
void fields(IO& io, M& m) requires std::is_same_v<std::remove_const_t<M>, ProbeReply> {
  io.u32("threads", m.threads, 1, kMaxThreads);
  io.u32("cores", m.cores, 1, 1u << 20);
  io.f32("mem_read_gbps", m.mem_read_gbps, 0.0f, 1e6f);
  io.f32("mem_read_gbps_1t", m.mem_read_gbps_1t, 0.0f, 1e6f);
  io.f32("int8_gops", m.int8_gops, 0.0f, 1e9f);
  io.f32("f32_gflops", m.f32_gflops, 0.0f, 1e9f);
  io.u64("mem_total_bytes", m.mem_total_bytes, kMaxByteCount);
  io.u64("mem_available_bytes", m.mem_available_bytes, kMaxByteCount);
  io.f32("age_s", m.age_s, 0.0f, 1e7f);
  io.string("cpu", m.cpu, 0, kMaxModelName, Charset::Printable);
  io.string("isa", m.isa, 0, kMaxVersionText, Charset::Printable);
  io.boolean("repack", m.repack);
  io.string("machine", m.machine, 0, kMaxVersionText, Charset::Printable);
  io.string("cpus", m.cpus, 0, kMaxCpuListText, Charset::Printable);
  const size_t n = io.count("n_peer_links", m.peer_links.size(), 0, kMaxGroup, 21);
  io.sized("peer_links", m.peer_links, n);
  for (size_t i = 0; i < n; ++i) {
    const auto at = static_cast<int64_t>(i);
    auto& l = m.peer_links[i];
    io.string(Field("peer_links", at, "name"), l.name, 1, kMaxNodeName, Charset::NodeName);
    io.f32(Field("peer_links", at, "rtt_s"), l.rtt_s, 0.0f, 600.0f);
    io.f32(Field("peer_links", at, "up_bytes_per_s"), l.up_bytes_per_s, 0.0f, 1e13f);
    io.f32(Field("peer_links", at, "down_bytes_per_s"), l.down_bytes_per_s, 0.0f, 1e13f);
    io.string(Field("peer_links", at, "error"), l.error, 0, kMaxErrorText, Charset::Text);
  }
  io.f32("machine_read_gbps", m.machine_read_gbps, 0.0f, 1e6f);
  const size_t n_rates = io.count("n_batch_rates", m.batch_rates.size(), 0, 16, 8);
  io.sized("batch_rates", m.batch_rates, n_rates);
  for (size_t i = 0; i < n_rates; ++i) {
    const auto at = static_cast<int64_t>(i);
    io.u32(Field("batch_rates", at, "tokens"), m.batch_rates[i].tokens, 1, 1u << 20);
    io.f32(Field("batch_rates", at, "fraction"), m.batch_rates[i].fraction, 0.0f, 4.0f);
  }
}

// The group messages: their codecs are in group_messages.cpp.
template <typename IO, typename M>
void fields(IO& io, M& m) requires group_codec::kIsGroupMessage<std::remove_const_t<M>> {
  group_codec::fields(io, m);
}

template <typename M>
Message decode_as(std::span<const uint8_t> body) {
  constexpr MsgType type = kTypeOf<M>;
  Decoder io(body, msg_type_name(type));
  M m;
  fields(io, m);
  // Hello and HelloAck tolerate fields appended by later versions, so a version mismatch can be reported.
  if constexpr (type == MsgType::Hello || type == MsgType::HelloAck) {
    io.reader().skip_rest();
  } else {
    io.reader().finish();
  }
  return m;
}

}  // namespace

MsgType type_of(const Message& message) {
  return std::visit([](const auto& m) { return kTypeOf<std::decay_t<decltype(m)>>; }, message);
}

namespace {

// Encodes into `out` after `prefix` reserved bytes (a frame needs no second buffer for its header), reusing
// out's capacity.
void encode_after(const Message& message, size_t prefix, std::vector<uint8_t>& out) {
  std::visit(
      [prefix, &out](const auto& m) {
        using M = std::decay_t<decltype(m)>;
        Encoder io(msg_type_name(kTypeOf<M>));
        std::vector<uint8_t>& data = io.writer().data();
        data.swap(out);
        data.clear();
        data.resize(prefix);
        fields(io, m);
        data.swap(out);
      },
      message);
}

}  // namespace

std::vector<uint8_t> encode_body(const Message& message) {
  std::vector<uint8_t> body;
  encode_after(message, 0, body);
  return body;
}

Message decode_body(MsgType type, std::span<const uint8_t> body) {
  if (body.size() > max_body_bytes(type)) {
    fail("bad frame: {} of {} bytes exceeds its limit of {} bytes", msg_type_name(type), body.size(),
         max_body_bytes(type));
  }
  switch (type) {
    case MsgType::Hello:
      return decode_as<Hello>(body);
    case MsgType::HelloAck:
      return decode_as<HelloAck>(body);
    case MsgType::Heartbeat:
      return decode_as<Heartbeat>(body);
    case MsgType::Ping:
      return decode_as<Ping>(body);
    case MsgType::Pong:
      return decode_as<Pong>(body);
    case MsgType::Error:
      return decode_as<ErrorMsg>(body);
    case MsgType::Bye:
      return decode_as<Bye>(body);
    case MsgType::LoadStage:
      return decode_as<LoadStage>(body);
    case MsgType::LoadReply:
      return decode_as<LoadReply>(body);
    case MsgType::WeightChunk:
      return decode_as<WeightChunk>(body);
    case MsgType::LoadProgress:
      return decode_as<LoadProgress>(body);
    case MsgType::LoadDone:
      return decode_as<LoadDone>(body);
    case MsgType::Forward:
      return decode_as<Forward>(body);
    case MsgType::ForwardResult:
      return decode_as<ForwardResult>(body);
    case MsgType::ClearSequence:
      return decode_as<ClearSequence>(body);
    case MsgType::TruncateSequence:
      return decode_as<TruncateSequence>(body);
    case MsgType::ProbeRequest:
      return decode_as<ProbeRequest>(body);
    case MsgType::ProbeReply:
      return decode_as<ProbeReply>(body);
    case MsgType::GroupJoin:
      return decode_as<GroupJoin>(body);
    case MsgType::GroupReady:
      return decode_as<GroupReady>(body);
    case MsgType::GroupLink:
      return decode_as<GroupLink>(body);
    case MsgType::CollectiveData:
      return decode_as<CollectiveData>(body);
    case MsgType::ShareRequest:
      return decode_as<ShareRequest>(body);
    case MsgType::ShareTable:
      return decode_as<ShareTable>(body);
    case MsgType::ShareAccept:
      return decode_as<ShareAccept>(body);
  }
  fail("bad frame: unknown message type {}", static_cast<int>(type));
}

void encode_frame(const Message& message, std::vector<uint8_t>& out) {
  encode_after(message, kFrameHeaderBytes, out);
  write_frame_header(type_of(message), out.size() - kFrameHeaderBytes, out.data());
}

std::vector<uint8_t> encode_frame(const Message& message) {
  std::vector<uint8_t> frame;
  encode_frame(message, frame);
  return frame;
}

Message decode_frame(std::span<const uint8_t> frame) {
  if (frame.size() < kFrameHeaderBytes) fail("truncated frame: {} bytes, the header alone has 8", frame.size());
  const FrameHeader h = parse_frame_header(frame.first<kFrameHeaderBytes>());
  if (frame.size() - kFrameHeaderBytes != h.body_bytes) {
    fail("bad frame: {} header says {} body bytes, the frame has {}", msg_type_name(h.type), h.body_bytes,
         frame.size() - kFrameHeaderBytes);
  }
  return decode_body(h.type, frame.subspan(kFrameHeaderBytes));
}

}  // namespace tessera::net
