// Wire codec: every message type round-trips; truncated, oversized and invalid messages fail with an Error that
// names the message type and field; activation conversion and content hashes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>

#include "net/codec.h"
#include "net/messages.h"
#include "util/error.h"

namespace tessera::net {
namespace {

Hash128 hash_of(uint8_t seed) {
  Hash128 h;
  for (size_t i = 0; i < h.size(); ++i) h[i] = static_cast<uint8_t>(seed * 17 + i);
  return h;
}

Activations matrix(WireType type, uint32_t rows, uint32_t cols) {
  std::vector<float> v(static_cast<size_t>(rows) * cols);
  for (size_t i = 0; i < v.size(); ++i) v[i] = 0.25f * static_cast<float>(i) - 3.0f;
  return encode_activations(v, rows, cols, type);
}

LoadStage sample_load_stage() {
  LoadStage m;
  m.file_name = "tiny-q8_0.gguf";
  m.file_size = 123456789;
  m.model_name = "Tiny Llama ünïcode";
  m.model_metadata = {'G', 'G', 'U', 'F', 3, 0, 0, 0};
  m.tensors.push_back({"blk.0.attn_q.weight", hash_of(1), 64 * 64 / 32 * 34, GgmlType::Q8_0, {64, 64}});
  m.tensors.push_back({"blk.0.attn_norm.weight", hash_of(2), 64 * 4, GgmlType::F32, {64}});
  m.tensors.push_back({"token_embd.weight", hash_of(3), 256 * 2 * 10 * 3, GgmlType::F16, {256, 10, 3}});
  m.layer_begin = 2;
  m.layer_end = 5;
  m.has_embedding = true;
  m.has_head = false;
  m.n_slots = 4;
  m.n_ctx = 2048;
  m.kv_type = GgmlType::F32;
  m.wire_type = WireType::BF16;
  m.threads = 8;
  m.max_batch = 96;
  m.group = {{"c", "10.0.0.3:50052"}, {"d", "[::1]:50053"}};
  m.model_hash = hash_of(6);
  m.group_tp = true;
  m.group_ep = true;
  m.group_timeout_s = 7.5f;
  m.group_shares = "2,1,1";
  m.group_ep_redundancy = 0.25f;
  return m;
}

Forward sample_forward() {
  Forward m;
  m.request_id = 0x1122334455667788ull;
  m.seq = {0, 0, 1};
  m.pos = {7, 8, 0};
  m.want_output = {0, 1, 1};
  m.tokens = {11, 12, 13};
  m.activations = matrix(WireType::F16, 3, 5);
  SamplingParams s;
  s.seq = 1;
  s.temperature = 0.7f;
  s.top_k = 20;
  s.top_p = 0.9f;
  s.min_p = 0.1f;
  s.repeat_penalty = 1.1f;
  s.repeat_last_n = -1;
  s.presence_penalty = 0.5f;
  s.frequency_penalty = -0.25f;
  s.seed = 42;
  s.draws = 17;
  s.history = {4, 4, 9};
  s.logprobs = true;
  s.top_logprobs = 3;
  s.grammar = "root ::= [a-z]+ \"\\n\"\n";
  s.grammar_tokens = {40, 41};
  m.sampling.push_back(s);
  return m;
}

ForwardResult sample_result() {
  ForwardResult m;
  m.request_id = 99;
  m.logits = matrix(WireType::F32, 1, 6);
  SampledOutput o;
  o.seq = 1;
  o.token = 5;
  o.has_logprob = true;
  o.logprob = -0.5f;
  o.top = {{5, -0.5f}, {2, -1.5f}, {3, -std::numeric_limits<float>::infinity()}};
  m.sampled.push_back(o);
  m.sampled.push_back({2, 9, false, 0.0f, {}});
  return m;
}

GroupJoin sample_group_join() {
  GroupJoin j;
  j.group_id = 0x1234567890abcdefull;
  j.rank = 2;
  j.members = {{"head", ""}, {"b", "10.0.0.2:50052"}, {"c", "[::1]:50053"}};
  j.file_name = "model.gguf";
  j.file_size = 123456789;
  j.model_hash = hash_of(5);
  j.tp = true;
  j.ep = true;
  j.shares = "2,1,1";
  j.n_slots = 4;
  j.n_ctx = 2048;
  j.kv_type = GgmlType::F32;
  j.wire_type = WireType::F16;
  j.threads = 8;
  j.exact_gelu = true;
  j.profile = true;
  j.timeout_s = 12.5f;
  j.layer_begin = 3;
  j.layer_end = 6;
  return j;
}

// One message of every type with every field away from its default.
ShareTable sample_share_table() {
  ShareTable t;
  t.group_id = 9;
  t.key = hash_of(5);
  t.share_hash = hash_of(6);
  t.model_metadata = {1, 2, 3};
  TensorInfo w;
  w.name = "blk.0.attn_q.weight";
  w.n_bytes = 64 * 8 * 4;
  w.type = GgmlType::F32;
  w.shape = {64, 8};
  t.tensors.push_back(w);
  t.runs.push_back({0, 128, 128, 256, 8});
  return t;
}

std::vector<Message> samples() {
  std::vector<Message> out;
  out.push_back(Hello{kProtocolVersion, Role::Worker, "node-b.1", "0.1.0"});
  out.push_back(HelloAck{HelloStatus::Busy, kProtocolVersion, "worker_b", "0.1.0", "busy: serving head h1"});
  out.push_back(Heartbeat{});
  out.push_back(Ping{7, 1024, {1, 2, 3}});
  out.push_back(Pong{7, {4, 5}});
  out.push_back(ErrorMsg{ErrorCode::OutOfMemory, "stage needs 12 GiB,\n8 GiB free", 0});
  out.push_back(ErrorMsg{ErrorCode::BadRequest, "sequence 9 is outside the cache", 17});
  out.push_back(Bye{"shutting down"});
  out.push_back(sample_load_stage());
  out.push_back(LoadReply{{hash_of(1)}, {hash_of(2), hash_of(3)}});
  out.push_back(WeightChunk{hash_of(4), 4096, {9, 8, 7, 6}});
  out.push_back(LoadProgress{100, 1000});
  out.push_back(LoadDone{1u << 30, 64u << 20, 8u << 20, {{16, 0.125f}, {32, 0.25f}, {128, 0.75f}}});
  out.push_back(LoadDone{1u << 30, 64u << 20, 8u << 20, {}});
  out.push_back(sample_forward());
  out.push_back(sample_result());
  out.push_back(ClearSequence{3});
  out.push_back(TruncateSequence{3, 17});
  out.push_back(ProbeRequest{1.5f, 300, {}});
  out.push_back(ProbeRequest{0.5f, 0, {{"b", "10.0.0.2:50052"}, {"c", "10.0.0.3:50052"}}});
  ProbeReply probe{2,
                   4,
                   12.5f,
                   9.75f,
                   640.0f,
                   160.0f,
                   uint64_t{32} << 30,
                   uint64_t{20} << 30,
                   42.0f,
                   "Xeon",
                   "avx512",
                   true,
                   "1b2c3d4e-boot",
                   "0-3,8",
                   {},
                   0.0f,
                   {}};
  out.push_back(probe);
  probe.peer_links = {{"b", 2.1e-4f, 1.1e9f, 1.2e9f, ""}, {"c", 0, 0, 0, "connection refused"}};
  probe.machine_read_gbps = 61.5f;
  probe.batch_rates = {{8, 0.81f}, {16, 0.9f}, {256, 1.0f}};
  out.push_back(probe);
  out.push_back(sample_group_join());
  out.push_back(GroupReady{0x1234567890abcdefull, "its cache"});
  out.push_back(GroupLink{0x1234567890abcdefull, 2});
  out.push_back(CollectiveData{4, 17, {1, 2, 3, 4, 5, 6, 7, 8}});
  out.push_back(ShareRequest{0x1234567890abcdefull});
  out.push_back(sample_share_table());
  out.push_back(ShareAccept{0x1234567890abcdefull});
  return out;
}

// Runs `fn`, expecting an Error whose message contains every one of `parts`.
template <typename Fn>
void expect_error(Fn&& fn, std::initializer_list<std::string> parts) {
  try {
    fn();
    ADD_FAILURE() << "no Error thrown; expected one mentioning " << *parts.begin();
  } catch (const Error& e) {
    for (const auto& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
}

Message decode(MsgType type, const std::vector<uint8_t>& body) { return decode_body(type, body); }

TEST(WireCodec, EveryMessageTypeRoundTrips) {
  std::set<MsgType> types;
  for (const Message& m : samples()) {
    const auto frame = encode_frame(m);
    const Message back = decode_frame(frame);
    EXPECT_EQ(back, m) << msg_type_name(type_of(m));
    EXPECT_EQ(type_of(back), type_of(m));
    EXPECT_EQ(encode_frame(back), frame);
    types.insert(type_of(m));
  }
  EXPECT_EQ(types.size(), std::variant_size_v<Message>);
}

TEST(WireCodec, ShareRunsLieInsideTheirTensor) {
  ShareTable t = sample_share_table();
  t.runs[0].count = 9;  // one row past the tensor's end
  expect_error([&] { encode_frame(t); }, {"runs", "leave the tensor"});
  t = sample_share_table();
  t.runs[0].stride = 64;  // rows that overlap
  expect_error([&] { encode_frame(t); }, {"runs"});
  t = sample_share_table();
  t.runs[0].tensor = 1;
  expect_error([&] { encode_frame(t); }, {"tensor"});
}

TEST(WireCodec, FrameHeaderIsLittleEndianLengthTypeFlags) {
  const auto frame = encode_frame(ClearSequence{0x0a0b0c});
  ASSERT_EQ(frame.size(), 12u);
  EXPECT_EQ(frame[0], 4);  // body length 4
  EXPECT_EQ(frame[1], 0);
  EXPECT_EQ(frame[4], static_cast<uint8_t>(MsgType::ClearSequence));
  EXPECT_EQ(frame[6], 0);
  EXPECT_EQ(frame[8], 0x0c);  // seq, little-endian
  EXPECT_EQ(frame[10], 0x0a);
  EXPECT_EQ(frame[11], 0x00);
}

TEST(WireCodec, EveryTruncationIsAnErrorNamingTheMessage) {
  for (const Message& m : samples()) {
    const auto frame = encode_frame(m);
    const std::string name(msg_type_name(type_of(m)));
    for (size_t len = 0; len < frame.size(); ++len) {
      EXPECT_THROW(decode_frame(std::span<const uint8_t>(frame.data(), len)), Error) << name << " at " << len;
    }
    // The body alone, cut anywhere, under a correct type.
    const auto body = encode_body(m);
    for (size_t len = 0; len < body.size(); ++len) {
      try {
        decode_body(type_of(m), std::span<const uint8_t>(body.data(), len));
        ADD_FAILURE() << name << " body cut at " << len << " decoded";
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
      }
    }
  }
}

TEST(WireCodec, TrailingBytesAreRefusedExceptInHello) {
  auto body = encode_body(ClearSequence{1});
  body.push_back(0);
  expect_error([&] { decode(MsgType::ClearSequence, body); }, {"ClearSequence", "unexpected bytes"});
  // Hello may grow in later versions: extra fields are skipped so the version can still be read and compared.
  auto hello = encode_body(Hello{2, Role::Head, "h", "9.9"});
  hello.insert(hello.end(), {1, 2, 3});
  EXPECT_EQ(std::get<Hello>(decode(MsgType::Hello, hello)).protocol_version, 2);
}

TEST(WireCodec, FrameHeaderChecks) {
  std::vector<uint8_t> frame(8, 0);
  frame[4] = 99;  // unknown type
  expect_error([&] { decode_frame(frame); }, {"unknown message type 99"});
  frame = encode_frame(Heartbeat{});
  frame[6] = 1;  // flags
  expect_error([&] { decode_frame(frame); }, {"Heartbeat", "flags"});
  // A header claiming more than its type's limit is refused from the header alone.
  uint8_t header[8];
  write_frame_header(MsgType::WeightChunk, 1000, header);
  const uint32_t huge = 300u << 20;
  std::memcpy(header, &huge, 4);
  expect_error([&] { parse_frame_header(std::span<const uint8_t, 8>(header, 8)); },
               {"WeightChunk", "exceeds its limit"});
  const uint32_t big_hello = 1u << 20;
  write_frame_header(MsgType::Hello, 10, header);
  std::memcpy(header, &big_hello, 4);
  expect_error([&] { parse_frame_header(std::span<const uint8_t, 8>(header, 8)); }, {"Hello", "exceeds its limit"});
  // Body length disagreeing with the header.
  frame = encode_frame(ClearSequence{1});
  frame.push_back(0);
  expect_error([&] { decode_frame(frame); }, {"ClearSequence", "header says 4"});
}

TEST(WireCodec, SizeLimitsPerType) {
  EXPECT_EQ(max_body_bytes(MsgType::Hello), 64u << 10);
  EXPECT_GE(max_body_bytes(MsgType::WeightChunk), kMaxChunkBytes);
  EXPECT_LT(max_body_bytes(MsgType::WeightChunk), kMaxChunkBytes + (1u << 20));
  // The encoder refuses what a receiver would refuse.
  WeightChunk chunk{hash_of(1), 0, std::vector<uint8_t>(kMaxChunkBytes + 1)};
  expect_error([&] { encode_body(chunk); }, {"WeightChunk", "data", "exceeds the limit"});
  Ping ping{1, 0, std::vector<uint8_t>(kMaxPingBytes + 1)};
  expect_error([&] { encode_body(ping); }, {"Ping", "payload"});
  ErrorMsg error{ErrorCode::Internal, std::string(kMaxErrorText + 1, 'x')};
  expect_error([&] { encode_body(error); }, {"Error", "message"});
}

TEST(WireCodec, BadEnumsAndBooleans) {
  Writer w;
  w.u16(1);
  w.u8(7);  // role
  w.string("h");
  w.string("0.1");
  expect_error([&] { decode(MsgType::Hello, w.take()); }, {"Hello", "role", "7"});

  Writer ack;
  ack.u8(9);  // status
  expect_error([&] { decode(MsgType::HelloAck, ack.take()); }, {"HelloAck", "status"});

  Writer err;
  err.u16(0);  // code
  err.string("x");
  expect_error([&] { decode(MsgType::Error, err.take()); }, {"Error", "code"});

  LoadStage alone = sample_load_stage();
  alone.group.clear();
  alone.group_shares.clear();
  // The body ends kv_type (u32), wire_type (u8), threads (u16), max_batch (u32), then 34 bytes of an empty group:
  // its count (u32), model_hash (16), group_tp, group_ep (bool), group_timeout_s (f32), group_shares (an empty
  // string: u32) and group_ep_redundancy (f32).
  auto body = encode_body(alone);
  body[body.size() - 41] = 7;
  expect_error([&] { decode(MsgType::LoadStage, body); }, {"LoadStage", "wire_type"});
  body = encode_body(alone);
  body[body.size() - 45] = static_cast<uint8_t>(GgmlType::Q4_0);  // kv_type (u32)
  expect_error([&] { decode(MsgType::LoadStage, body); }, {"LoadStage", "kv_type", "q4_0"});
  body = encode_body(alone);
  body[body.size() - 45] = 200;  // not a ggml type at all
  expect_error([&] { decode(MsgType::LoadStage, body); }, {"LoadStage", "kv_type", "200"});

  Forward f = sample_forward();
  f.want_output[0] = 2;
  expect_error([&] { encode_body(f); }, {"Forward", "want_output[0]", "boolean"});
  body = encode_body(sample_forward());
  // want_output[0] follows request_id (8), n_tokens (4), seq (12), pos (12).
  body[36] = 2;
  expect_error([&] { decode(MsgType::Forward, body); }, {"Forward", "want_output[0]"});
}

TEST(WireCodec, CountsBeyondTheMessageAreRefusedBeforeAllocating) {
  Writer w;
  w.u64(1);      // request_id
  w.u32(60000);  // n_tokens, but nothing follows
  expect_error([&] { decode(MsgType::Forward, w.take()); }, {"Forward", "n_tokens", "count 60000"});
  Writer over;
  over.u64(1);
  over.u32(1u << 20);  // over the batch limit
  expect_error([&] { decode(MsgType::Forward, over.take()); }, {"Forward", "n_tokens", "exceeds the limit"});
  Writer hashes;
  hashes.u32(1000);  // have: 1000 hashes, 0 bytes follow
  expect_error([&] { decode(MsgType::LoadReply, hashes.take()); }, {"LoadReply", "have", "count 1000"});
  Writer text;
  text.u16(1);
  text.u32(0xffffffffu);  // Error.message length
  expect_error([&] { decode(MsgType::Error, text.take()); }, {"Error", "message"});
}

TEST(WireCodec, LoadStageFieldChecks) {
  auto bad = [](auto mutate, std::initializer_list<std::string> parts) {
    LoadStage m = sample_load_stage();
    mutate(m);
    expect_error([&] { encode_body(m); }, parts);
  };
  bad([](LoadStage& m) { m.file_name = "../etc/passwd"; }, {"LoadStage", "file_name"});
  bad([](LoadStage& m) { m.file_name = ""; }, {"file_name"});
  bad([](LoadStage& m) { m.model_name = std::string("a\x01", 2); }, {"model_name"});
  bad([](LoadStage& m) { m.model_name = "\xff\xfe"; }, {"model_name", "UTF-8"});
  bad([](LoadStage& m) { m.tensors[1].name = "has space"; }, {"tensors[1].name"});
  bad([](LoadStage& m) { m.tensors[1].name = m.tensors[0].name; }, {"tensors[1].name", "twice"});
  bad([](LoadStage& m) { m.tensors[0].n_bytes += 1; }, {"tensors[0].n_bytes"});
  bad([](LoadStage& m) { m.tensors[0].shape = {48, 64}; }, {"tensors[0].shape", "block size"});
  bad([](LoadStage& m) { m.tensors[1].shape = {0}; }, {"tensors[1].shape"});
  bad([](LoadStage& m) { m.tensors[1].shape = {1, 1, 1, 1, 64}; }, {"tensors[1].n_dims"});
  bad([](LoadStage& m) { m.tensors[2].type = static_cast<GgmlType>(4); }, {"tensors[2].type"});
  bad([](LoadStage& m) { m.layer_end = 1; }, {"layer_end"});
  bad(
      [](LoadStage& m) {
        m.layer_end = m.layer_begin;
        m.has_embedding = false;
        m.has_head = false;
      },
      {"layer_end", "holds no layer"});
  bad([](LoadStage& m) { m.n_slots = 0; }, {"n_slots"});
  bad([](LoadStage& m) { m.n_ctx = kMaxCtx + 1; }, {"n_ctx"});
  bad([](LoadStage& m) { m.threads = 5000; }, {"threads"});
  bad([](LoadStage& m) { m.max_batch = 0; }, {"max_batch"});
  bad([](LoadStage& m) { m.group[1].address = ""; }, {"group[1].address"});
  bad([](LoadStage& m) { m.group[0].name = "has space"; }, {"group[0].name"});
  bad(
      [](LoadStage& m) {
        m.group_tp = false;
        m.group_ep = false;
      },
      {"group_tp", "tensor parallel"});
  bad([](LoadStage& m) { m.group_timeout_s = 0; }, {"group_timeout_s"});
  bad([](LoadStage& m) { m.group_ep_redundancy = 2; }, {"group_ep_redundancy"});
  bad(
      [](LoadStage& m) {
        m.group.clear();
        m.group_shares = "1,1";
      },
      {"group_shares", "without a group"});
  // The same checks run on decode: flip a byte of a tensor name to a space in a valid encoding.
  auto body = encode_body(sample_load_stage());
  const std::string name = "blk.0.attn_q.weight";
  auto at = std::search(body.begin(), body.end(), name.begin(), name.end());
  ASSERT_NE(at, body.end());
  at[3] = ' ';
  expect_error([&] { decode(MsgType::LoadStage, body); }, {"LoadStage", "tensors[0].name"});
}

TEST(WireCodec, ForwardFieldChecks) {
  auto bad = [](auto mutate, std::initializer_list<std::string> parts) {
    Forward m = sample_forward();
    mutate(m);
    expect_error([&] { encode_body(m); }, parts);
  };
  bad([](Forward& m) { m.seq[2] = -1; }, {"Forward", "seq[2]"});
  bad([](Forward& m) { m.pos.pop_back(); }, {"pos", "entries"});
  bad([](Forward& m) { m.tokens.pop_back(); }, {"tokens"});
  bad([](Forward& m) { m.tokens[0] = -5; }, {"tokens[0]"});
  bad([](Forward& m) { m.activations->n_rows = 2; }, {"activations.n_rows"});
  bad([](Forward& m) { m.activations->data.pop_back(); }, {"activations.data"});
  bad(
      [](Forward& m) {
        m.tokens.clear();
        m.activations.reset();
      },
      {"has_tokens", "tokens or activations"});
  bad([](Forward& m) { m.sampling[0].temperature = std::nanf(""); }, {"sampling[0].temperature", "finite"});
  bad([](Forward& m) { m.sampling[0].top_p = 0.0f; }, {"sampling[0].top_p"});
  bad([](Forward& m) { m.sampling[0].min_p = 1.5f; }, {"sampling[0].min_p"});
  bad([](Forward& m) { m.sampling[0].repeat_penalty = 0.0f; }, {"sampling[0].repeat_penalty"});
  bad([](Forward& m) { m.sampling[0].top_k = -2; }, {"sampling[0].top_k"});
  bad([](Forward& m) { m.sampling[0].top_logprobs = 1000; }, {"sampling[0].top_logprobs"});
  bad([](Forward& m) { m.sampling[0].logprobs = false; }, {"sampling[0].top_logprobs", "logprobs is 0"});
  bad([](Forward& m) { m.sampling[0].seed = 0xFFFFFFFF; }, {"sampling[0].seed", "resolved"});
  bad([](Forward& m) { m.sampling[0].repeat_last_n = 2; }, {"sampling[0].n_history"});
  bad([](Forward& m) { m.sampling[0].history[1] = -1; }, {"sampling[0].history"});
  bad([](Forward& m) { m.sampling[0].seq = 5; }, {"sampling[0].seq", "no output token"});
  bad([](Forward& m) { m.sampling.push_back(m.sampling[0]); }, {"sampling[1].seq", "two entries"});
  bad([](Forward& m) { m.sampling[0].grammar = "root ::= \"\x01\""; }, {"sampling[0].grammar"});
  bad([](Forward& m) { m.sampling[0].grammar_tokens[0] = -1; }, {"sampling[0].grammar_tokens"});
  bad([](Forward& m) { m.sampling[0].grammar.clear(); }, {"sampling[0].n_grammar_tokens"});
  bad([](Forward& m) { m.seq.clear(), m.pos.clear(), m.want_output.clear(), m.tokens.clear(); }, {"n_tokens"});
  // Activations alone (a middle stage) are fine.
  Forward middle = sample_forward();
  middle.tokens.clear();
  middle.sampling.clear();
  EXPECT_EQ(std::get<Forward>(decode_frame(encode_frame(middle))), middle);
}

TEST(WireCodec, ForwardResultFieldChecks) {
  auto bad = [](auto mutate, std::initializer_list<std::string> parts) {
    ForwardResult m = sample_result();
    mutate(m);
    expect_error([&] { encode_body(m); }, parts);
  };
  bad([](ForwardResult& m) { m.hidden = matrix(WireType::F32, 2, 2); }, {"ForwardResult", "hidden"});
  bad([](ForwardResult& m) { m.sampled[0].logprob = 0.5f; }, {"sampled[0].logprob"});
  bad([](ForwardResult& m) { m.sampled[0].top[1].logprob = std::nanf(""); }, {"sampled[0].top.logprob"});
  bad([](ForwardResult& m) { m.sampled[1].top = {{1, -1.0f}}; }, {"sampled[1].has_logprob"});
  bad([](ForwardResult& m) { m.sampled[0].token = -1; }, {"sampled[0].token"});
  bad([](ForwardResult& m) { m.logits->type = static_cast<WireType>(3); }, {"logits.type"});
  ForwardResult hidden;
  hidden.request_id = 5;
  hidden.hidden = matrix(WireType::BF16, 4, 8);
  EXPECT_EQ(std::get<ForwardResult>(decode_frame(encode_frame(hidden))), hidden);
}

TEST(WireCodec, OtherFieldChecks) {
  expect_error([] { encode_body(Hello{1, Role::Head, "", "x"}); }, {"Hello", "node_name"});
  expect_error([] { encode_body(Hello{1, Role::Head, "a b", "x"}); }, {"Hello", "node_name"});
  expect_error([] { encode_body(Hello{0, Role::Head, "a", "x"}); }, {"Hello", "protocol_version"});
  expect_error([] { encode_body(HelloAck{HelloStatus::Busy, 1, "w", "x", ""}); }, {"HelloAck", "reason"});
  expect_error([] { encode_body(LoadProgress{5, 4}); }, {"LoadProgress", "bytes_done"});
  expect_error([] { encode_body(WeightChunk{hash_of(1), 0, {}}); }, {"WeightChunk", "data"});
  expect_error([] { encode_body(TruncateSequence{1, -1}); }, {"TruncateSequence", "n"});
  expect_error([] { encode_body(ClearSequence{-3}); }, {"ClearSequence", "seq"});
  expect_error([] { encode_body(Ping{1, kMaxPingBytes + 1, {}}); }, {"Ping", "reply_bytes"});
  expect_error([] { encode_body(ErrorMsg{ErrorCode::Internal, ""}); }, {"Error", "message"});
  // A stage's batch times: sizes in order, each a real duration.
  expect_error([] { encode_body(LoadDone{1, 1, 1, {{32, 0.1f}, {32, 0.2f}}}); }, {"LoadDone", "batch_times[1].tokens"});
  expect_error([] { encode_body(LoadDone{1, 1, 1, {{0, 0.1f}}}); }, {"LoadDone", "batch_times[0].tokens"});
  expect_error([] { encode_body(LoadDone{1, 1, 1, {{16, NAN}}}); }, {"LoadDone", "batch_times[0].seconds"});
  expect_error([] { encode_body(LoadDone{1, 1, 1, {{16, -1.0f}}}); }, {"LoadDone", "batch_times[0].seconds"});
  expect_error(
      [] {
        encode_body(LoadDone{1, 1, 1, {{16, 2 * kMaxBatchSeconds}}});
      },
      {"LoadDone", "batch_times[0].seconds"});
  LoadDone many{1, 1, 1, {}};
  for (uint32_t i = 1; i <= kMaxBatchTimes + 1; ++i) many.batch_times.push_back({i, 0.1f});
  expect_error([&] { encode_body(many); }, {"LoadDone", "n_batch_times"});
}

TEST(WireCodec, AnyTextBecomesAValidErrorMessage) {
  EXPECT_EQ(wire_text("ok\tfine\n", 100), "ok\tfine\n");
  EXPECT_EQ(wire_text("bad\x01\x7f\xff end", 100), "bad??? end");
  EXPECT_EQ(wire_text("h\xc3\xa9llo", 2), "h");  // never cut inside a character
  EXPECT_EQ(wire_text("\xe2\x9c", 10), "??");    // a truncated sequence
  const ErrorMsg long_one = error_message(ErrorCode::Internal, std::string(10000, 'x') + "\x01");
  EXPECT_EQ(long_one.message.size(), kMaxErrorText);
  EXPECT_EQ(std::get<ErrorMsg>(decode_frame(encode_frame(long_one))), long_one);
  EXPECT_EQ(error_message(ErrorCode::OutOfMemory, "").message, "out of memory");
}

TEST(WireCodec, ActivationConversion) {
  const std::vector<float> values = {0.0f, -0.0f, 1.0f, -2.5f, 65504.0f, 1e-3f, 3.14159f, -1e-8f};
  const auto f32 = encode_activations(values, 2, 4, WireType::F32);
  EXPECT_EQ(f32.data.size(), 32u);
  EXPECT_EQ(decode_activations(f32), values);
  const auto f16 = encode_activations(values, 2, 4, WireType::F16);
  const auto bf16 = encode_activations(values, 4, 2, WireType::BF16);
  EXPECT_EQ(f16.data.size(), 16u);
  EXPECT_EQ(bf16.data.size(), 16u);
  const auto back16 = decode_activations(f16);
  const auto backbf = decode_activations(bf16);
  for (size_t i = 0; i < values.size(); ++i) {
    EXPECT_NEAR(back16[i], values[i], std::abs(values[i]) * 1e-3f + 1e-7f) << i;
    EXPECT_NEAR(backbf[i], values[i], std::abs(values[i]) * 8e-3f + 1e-9f) << i;
  }
  EXPECT_EQ(back16[4], 65504.0f);  // f16's largest finite value survives exactly
  EXPECT_EQ(wire_type_from_name("bf16"), WireType::BF16);
  EXPECT_FALSE(wire_type_from_name("q8_0").has_value());
  EXPECT_THROW(encode_activations(values, 3, 3, WireType::F32), Error);
  std::vector<float> out(3);
  EXPECT_THROW(decode_activations(f16, out), Error);
}

TEST(WireCodec, ContentHashAndText) {
  const std::vector<uint8_t> a = {1, 2, 3};
  const std::vector<uint8_t> b = {1, 2, 4};
  EXPECT_EQ(content_hash(a), content_hash(a));
  EXPECT_NE(content_hash(a), content_hash(b));
  EXPECT_EQ(hash_hex(content_hash(a)).size(), 32u);
  EXPECT_TRUE(valid_utf8("héllo ✓"));
  EXPECT_FALSE(valid_utf8("\xc0\x80"));          // overlong
  EXPECT_FALSE(valid_utf8("\xed\xa0\x80"));      // surrogate
  EXPECT_FALSE(valid_utf8("\xf4\x90\x80\x80"));  // past U+10FFFF
  EXPECT_FALSE(valid_utf8("\xe2\x9c"));          // cut short
}

TEST(WireCodec, GroupJoinRules) {
  GroupJoin j = sample_group_join();
  j.rank = 3;  // a group of 3 has ranks 1 and 2 for its workers
  expect_error([&] { (void)encode_frame(j); }, {"GroupJoin", "rank"});
  j = sample_group_join();
  j.tp = j.ep = false;
  expect_error([&] { (void)encode_frame(j); }, {"GroupJoin", "tensor parallel, expert parallel or both"});
  j = sample_group_join();
  j.members[1].address.clear();  // only the head may have no address
  expect_error([&] { (void)encode_frame(j); }, {"GroupJoin", "members[1].address"});
  j = sample_group_join();
  j.members.resize(1);
  expect_error([&] { (void)encode_frame(j); }, {"GroupJoin", "n_members"});
  j = sample_group_join();
  j.layer_end = 2;  // before layer_begin 3
  expect_error([&] { (void)encode_frame(j); }, {"GroupJoin", "layer_end"});
}

}  // namespace
}  // namespace tessera::net
