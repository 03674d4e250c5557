// libFuzzer target for the wire protocol decoder: any bytes must decode or throw tessera::Error, and a decoded
// message must re-encode to a frame that decodes to the same message and the same bytes. Built a second time with
// TESSERA_WIRE_FUZZ_SEEDS as `wire_fuzz_seeds`, which writes one seed per message type.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "hw/probe.h"
#include "net/messages.h"
#include "util/error.h"

using namespace tessera::net;

#ifndef TESSERA_WIRE_FUZZ_SEEDS

namespace {

// The first byte picks how the rest is read: even, a whole frame (header included); odd, a u16 type and a body,
// so the fuzzer explores bodies without having to keep the header's length in step.
std::vector<uint8_t> as_frame(const uint8_t* data, size_t size) {
  if (size == 0) return {};
  if ((data[0] & 1) == 0) return {data + 1, data + size};
  if (size < 3) return {data + 1, data + size};
  uint16_t type;
  std::memcpy(&type, data + 1, 2);
  const size_t body = size - 3;
  std::vector<uint8_t> frame(kFrameHeaderBytes + body);
  const auto length = static_cast<uint32_t>(body);
  std::memcpy(frame.data(), &length, 4);
  std::memcpy(frame.data() + 4, &type, 2);
  if (body > 0) std::memcpy(frame.data() + kFrameHeaderBytes, data + 3, body);
  return frame;
}

[[noreturn]] void violated(const char* what) {
  std::fprintf(stderr, "wire_fuzz: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::vector<uint8_t> frame = as_frame(data, size);
  Message message;
  try {
    message = decode_frame(frame);
  } catch (const tessera::Error&) {
    return 0;  // refused with a message: the expected outcome for most inputs
  }
  std::vector<uint8_t> again;
  try {
    again = encode_frame(message);
  } catch (const tessera::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    violated("a decoded message failed to encode");
  }
  Message back;
  try {
    back = decode_frame(again);
  } catch (const tessera::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    violated("a re-encoded message failed to decode");
  }
  if (!(back == message)) violated("decode(encode(m)) != m");
  if (encode_frame(back) != again) violated("encoding is not deterministic");
  // Only Hello and HelloAck may carry bytes the encoding drops (fields of later versions).
  const MsgType type = type_of(message);
  if (type != MsgType::Hello && type != MsgType::HelloAck && again != frame)
    violated("decoding accepted a non-canonical frame");
  // The head's planner reads a worker's CPU list: any text must give an ascending list or an Error.
  if (const auto* probe = std::get_if<ProbeReply>(&message)) {
    try {
      const std::vector<int> cpus = tessera::parse_cpu_list(probe->cpus, probe->cores);
      if (cpus.size() > probe->cores) violated("parse_cpu_list returned more CPUs than allowed");
      for (size_t i = 1; i < cpus.size(); ++i) {
        if (cpus[i] <= cpus[i - 1]) violated("parse_cpu_list returned CPUs out of order");
      }
    } catch (const tessera::Error&) {
      // refused with a message
    }
  }
  return 0;
}

#else

namespace {

Hash128 hash_of(uint8_t seed) {
  Hash128 h;
  for (size_t i = 0; i < h.size(); ++i) h[i] = static_cast<uint8_t>(seed + i);
  return h;
}

std::vector<Message> seeds() {
  std::vector<Message> out;
  out.push_back(Hello{kProtocolVersion, Role::Head, "h1", "0.1.0"});
  out.push_back(HelloAck{HelloStatus::Busy, kProtocolVersion, "w1", "0.1.0", "busy: serving head h0"});
  out.push_back(Heartbeat{});
  out.push_back(Ping{1, 16, {1, 2, 3, 4}});
  out.push_back(Pong{1, {5, 6}});
  out.push_back(ErrorMsg{ErrorCode::BadRequest, "sequence 9 is outside the cache"});
  out.push_back(Bye{"bye"});
  LoadStage load;
  load.file_name = "m.gguf";
  load.file_size = 1 << 20;
  load.model_name = "tiny";
  load.model_metadata = {'G', 'G', 'U', 'F'};
  load.tensors.push_back({"blk.0.attn_q.weight", hash_of(1), 64 * 64 / 32 * 34, tessera::GgmlType::Q8_0, {64, 64}});
  load.tensors.push_back({"output_norm.weight", hash_of(2), 256, tessera::GgmlType::F32, {64}});
  load.layer_begin = 0;
  load.layer_end = 2;
  load.has_embedding = true;
  load.has_head = true;
  load.n_slots = 2;
  load.n_ctx = 128;
  out.push_back(load);
  LoadStage grouped = load;  // a stage held by a group (protocol 11)
  grouped.group = {{"c", "127.0.0.1:50053"}};
  grouped.group_tp = true;
  out.push_back(grouped);
  out.push_back(LoadReply{{hash_of(1)}, {hash_of(2)}});
  out.push_back(WeightChunk{hash_of(3), 64, {1, 2, 3}});
  out.push_back(LoadProgress{1, 2});
  out.push_back(LoadDone{1, 2, 3, {{16, 0.01f}, {64, 0.03f}}});
  Forward f;
  f.request_id = 5;
  f.seq = {0, 1};
  f.pos = {3, 0};
  f.want_output = {1, 1};
  f.tokens = {10, 20};
  f.activations = encode_activations(std::vector<float>(2 * 4, 0.5f), 2, 4, WireType::F16);
  SamplingParams s;
  s.seq = 1;
  s.seed = 7;
  s.draws = 3;
  s.history = {5, 6};
  s.logprobs = true;
  s.top_logprobs = 2;
  s.grammar = "root ::= \"{\" [0-9]* \"}\"\n";
  s.grammar_tokens = {9};
  f.sampling.push_back(s);
  out.push_back(f);
  ForwardResult r;
  r.request_id = 5;
  r.logits = encode_activations(std::vector<float>(3, -1.0f), 1, 3, WireType::BF16);
  r.sampled.push_back({1, 7, true, -0.1f, {{7, -0.1f}, {3, -std::numeric_limits<float>::infinity()}}});
  out.push_back(r);
  ForwardResult hidden;
  hidden.hidden = encode_activations(std::vector<float>(8, 2.0f), 2, 4, WireType::F32);
  out.push_back(hidden);
  out.push_back(ClearSequence{1});
  out.push_back(TruncateSequence{1, 2});
  out.push_back(ProbeRequest{1.0f, 300, {{"b", "127.0.0.1:50052"}}});
  ProbeReply probe{1,
                   2,
                   10.0f,
                   9.0f,
                   600.0f,
                   150.0f,
                   1u << 30,
                   1u << 29,
                   5.0f,
                   "cpu",
                   "avx2",
                   true,
                   "0f1e2d3c-boot",
                   "0-1",
                   {},
                   30.0f,
                   {{8, 0.8f}, {256, 1.0f}}};
  probe.peer_links = {{"b", 1e-4f, 1e9f, 1e9f, ""}};
  out.push_back(probe);
  GroupJoin join;
  join.members = {{"head", ""}, {"b", "127.0.0.1:50052"}};
  join.file_name = "m.gguf";
  join.tp = true;
  join.n_ctx = 256;
  out.push_back(join);
  GroupJoin stage_join = join;  // a pipeline stage's group: its layers only
  stage_join.layer_begin = 1;
  stage_join.layer_end = 2;
  out.push_back(stage_join);
  out.push_back(GroupReady{7, "its cache"});
  out.push_back(GroupLink{7, 1});
  out.push_back(CollectiveData{1, 3, {0, 0, 128, 63}});
  out.push_back(ShareRequest{7});
  ShareTable share;
  share.group_id = 7;
  share.tensors.push_back({"output.weight", {}, 32 * 4 * 4, tessera::GgmlType::F32, {32, 4}});
  share.runs.push_back({0, 0, 64, 128, 4});
  out.push_back(share);
  out.push_back(ShareAccept{7});
  return out;
}

}  // namespace

// Writes seeds into the directory given: each message as a whole frame (mode byte 0) and as type + body (1).
int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: wire_fuzz_seeds DIR\n");
    return 2;
  }
  int n = 0;
  for (const Message& m : seeds()) {
    const auto frame = encode_frame(m);
    std::vector<uint8_t> whole = {0};
    whole.insert(whole.end(), frame.begin(), frame.end());
    std::vector<uint8_t> body = {1, frame[4], frame[5]};
    body.insert(body.end(), frame.begin() + kFrameHeaderBytes, frame.end());
    for (const auto* bytes : {&whole, &body}) {
      const std::string path = std::string(argv[1]) + "/seed_" + std::to_string(n++);
      std::ofstream out(path, std::ios::binary);
      out.write(reinterpret_cast<const char*>(bytes->data()), static_cast<std::streamsize>(bytes->size()));
      if (!out) {
        std::fprintf(stderr, "cannot write %s\n", path.c_str());
        return 1;
      }
    }
  }
  return 0;
}

#endif
