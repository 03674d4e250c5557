// The wire protocol's messages (docs/protocol.md has a table per message), their per-type size limits, and the
// validating encoder/decoder. A frame is an 8-byte header (u32 body length, u16 type, u16 flags = 0) and a body.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "net/codec.h"
#include "tensor/ggml_type.h"

namespace tessera::net {

// Bumped on any incompatible change to a message; Hello carries it. The frame header and the leading fields of
// Hello and HelloAck never change, so any two versions can at least tell each other they differ.
inline constexpr uint16_t kProtocolVersion = 13;

// Numeric values are the wire encoding; never renumber.
enum class MsgType : uint16_t {
  Hello = 1,
  HelloAck = 2,
  Heartbeat = 3,
  Ping = 4,
  Pong = 5,
  Error = 6,
  Bye = 7,
  LoadStage = 16,
  LoadReply = 17,
  WeightChunk = 18,
  LoadProgress = 19,
  LoadDone = 20,
  Forward = 32,
  ForwardResult = 33,
  ClearSequence = 34,
  TruncateSequence = 35,
  ProbeRequest = 48,
  ProbeReply = 49,
  GroupJoin = 64,
  GroupReady = 65,
  GroupLink = 66,
  CollectiveData = 67,
  ShareRequest = 68,
  ShareTable = 69,
  ShareAccept = 70,
};

std::string_view msg_type_name(MsgType type);
// The type for a wire id, or nullopt for an id this version does not know.
std::optional<MsgType> msg_type_from_id(uint16_t id);
// Largest body a frame of this type may carry; checked before a receiver allocates anything.
size_t max_body_bytes(MsgType type);

// Limits on individual fields (docs/protocol.md lists them).
inline constexpr size_t kMaxNodeName = 64;
inline constexpr size_t kMaxVersionText = 64;
inline constexpr size_t kMaxReason = 512;
inline constexpr size_t kMaxErrorText = 4096;
inline constexpr size_t kMaxFileName = 255;
inline constexpr size_t kMaxModelName = 256;
inline constexpr size_t kMaxCpuListText = 4096;  // "0-3,8": a worker's CPUs
inline constexpr size_t kMaxTensorName = 256;
inline constexpr size_t kMaxModelMetadata = 48u << 20;
inline constexpr size_t kMaxTensors = 1u << 16;
inline constexpr uint32_t kMaxDims = 4;
inline constexpr uint32_t kMaxLayers = 4096;
inline constexpr uint32_t kMaxSlots = 4096;
inline constexpr uint32_t kMaxCtx = 1u << 24;
inline constexpr uint32_t kMaxThreads = 1024;
inline constexpr size_t kMaxPingBytes = 16u << 20;
inline constexpr size_t kMaxChunkBytes = 256u << 20;
inline constexpr size_t kMaxBatchTokens = 1u << 16;
inline constexpr size_t kMaxBatchTimes = 16;
inline constexpr float kMaxBatchSeconds = 1e7f;  // a measured pass (the worker reports longer ones as this)
inline constexpr uint32_t kMaxEmbd = 1u << 20;
inline constexpr uint32_t kMaxVocab = 1u << 24;
inline constexpr uint32_t kMaxLogprobs = 256;
inline constexpr size_t kMaxGrammarBytes = size_t{1} << 20;  // a sampling request's grammar text
inline constexpr int32_t kMaxSeq = 1 << 20;
inline constexpr size_t kMaxAddress = 300;         // "host:port" of a group member
inline constexpr uint32_t kMaxGroup = 256;         // members of a tensor-parallel group
inline constexpr size_t kMaxSharesText = 4096;     // "2,1,1"
inline constexpr size_t kMaxShareRuns = 1u << 20;  // runs of a share's bytes (ShareTable)

// Peer: a worker dialling another worker of its tensor-parallel group (protocol 7).
enum class Role : uint8_t { Head = 1, Worker = 2, Peer = 3 };
std::string_view role_name(Role role);

// Why a HelloAck refuses; Accepted otherwise.
enum class HelloStatus : uint8_t { Accepted = 0, VersionMismatch = 1, Busy = 2, BadRole = 3, Refused = 4 };
std::string_view hello_status_name(HelloStatus status);

enum class ErrorCode : uint16_t {
  Protocol = 1,     // the peer sent something this node cannot accept at this point
  BadRequest = 2,   // a well-formed request this node cannot carry out (bad sequence, out of context, ...)
  LoadFailed = 3,   // weights missing, hash mismatch, file changed
  OutOfMemory = 4,  // the stage does not fit
  Internal = 5,
};
std::string_view error_code_name(ErrorCode code);

struct Hello {
  static constexpr MsgType kType = MsgType::Hello;
  uint16_t protocol_version = kProtocolVersion;
  Role role = Role::Head;
  std::string node_name;
  std::string software_version;
  bool operator==(const Hello&) const = default;
};

struct HelloAck {
  static constexpr MsgType kType = MsgType::HelloAck;
  HelloStatus status = HelloStatus::Accepted;
  uint16_t protocol_version = kProtocolVersion;
  std::string node_name;
  std::string software_version;
  std::string reason;  // empty when accepted; says why otherwise ("busy: serving head h1")
  bool accepted() const { return status == HelloStatus::Accepted; }
  bool operator==(const HelloAck&) const = default;
};

struct Heartbeat {
  static constexpr MsgType kType = MsgType::Heartbeat;
  bool operator==(const Heartbeat&) const = default;
};

// Link measurement: the receiver answers with a Pong of `reply_bytes` bytes (inside Connection::recv).
struct Ping {
  static constexpr MsgType kType = MsgType::Ping;
  uint64_t id = 0;
  uint32_t reply_bytes = 0;
  std::vector<uint8_t> payload;
  bool operator==(const Ping&) const = default;
};

struct Pong {
  static constexpr MsgType kType = MsgType::Pong;
  uint64_t id = 0;
  std::vector<uint8_t> payload;
  bool operator==(const Pong&) const = default;
};

// The wire's Error message (named so it is not confused with tessera::Error, the exception). Build one from any
// text with error_message(), which makes the text fit the field.
struct ErrorMsg {
  static constexpr MsgType kType = MsgType::Error;
  ErrorCode code = ErrorCode::Internal;
  std::string message;
  // The Forward's request_id this error answers; 0 for any other message (ClearSequence, TruncateSequence, a
  // protocol error), which no pending job may be blamed for.
  uint64_t request_id = 0;
  bool operator==(const ErrorMsg&) const = default;
};

struct Bye {
  static constexpr MsgType kType = MsgType::Bye;
  std::string reason;
  bool operator==(const Bye&) const = default;
};

// One tensor of a stage: what the worker must hold, named by content so it can reuse what it already has.
struct TensorInfo {
  std::string name;
  Hash128 hash{};
  uint64_t n_bytes = 0;
  GgmlType type = GgmlType::F32;
  std::vector<uint64_t> shape;  // ne[0] (contiguous) first, 1 to 4 dimensions
  bool operator==(const TensorInfo&) const = default;
};

// A member of a tensor-parallel group (GroupJoin), or a peer a worker measures its link to (ProbeRequest).
struct GroupMember {
  std::string name;     // as the head names it (--workers); "head" for rank 0
  std::string address;  // "host:port" where the member accepts its peers (empty for the head: it dials, never accepts)
  bool operator==(const GroupMember&) const = default;
};

struct LoadStage {
  static constexpr MsgType kType = MsgType::LoadStage;
  // Model identity, for messages and for a worker that finds the same file locally.
  std::string file_name;  // base name of the GGUF file on the head
  uint64_t file_size = 0;
  std::string model_name;  // general.name
  // The model's key/value metadata as a GGUF file without tensors (tokenizer arrays may be left out); the
  // worker parses it with its validating GGUF reader to get the architecture and hyperparameters.
  std::vector<uint8_t> model_metadata;
  std::vector<TensorInfo> tensors;
  uint32_t layer_begin = 0;  // [layer_begin, layer_end)
  uint32_t layer_end = 0;
  bool has_embedding = false;
  bool has_head = false;
  uint32_t n_slots = 1;
  uint32_t n_ctx = 0;
  GgmlType kv_type = GgmlType::F16;  // F16 or F32
  WireType wire_type = WireType::F32;
  uint16_t threads = 0;      // 0: all cores
  uint32_t max_batch = 512;  // the most tokens one Forward will carry: sizes the buffers the worker reports
  // A stage held by a group (protocol 11): the other members by rank (1..), which this worker makes a group of as
  // its rank 0 (GroupJoin with the stage's layers), the model's identity for them, and the group's options. Empty:
  // the stage is this worker's alone.
  std::vector<GroupMember> group;
  Hash128 model_hash{};
  bool group_tp = false;
  bool group_ep = false;
  float group_timeout_s = 30.0f;
  // Protocol 12: the members' shares of the stage ("2,1", rank order; empty: equal) and, for an ep group, the
  // copies of experts held besides (--ep-redundancy), as GroupJoin carries them.
  std::string group_shares;
  float group_ep_redundancy = 0.0f;
  bool operator==(const LoadStage&) const = default;
};

// The worker's answer to LoadStage: which tensors it already has (by hash) and which the head must send.
struct LoadReply {
  static constexpr MsgType kType = MsgType::LoadReply;
  std::vector<Hash128> have;
  std::vector<Hash128> need;
  bool operator==(const LoadReply&) const = default;
};

struct WeightChunk {
  static constexpr MsgType kType = MsgType::WeightChunk;
  Hash128 hash{};
  uint64_t offset = 0;  // byte offset inside the tensor
  std::vector<uint8_t> data;
  bool operator==(const WeightChunk&) const = default;
};

struct LoadProgress {
  static constexpr MsgType kType = MsgType::LoadProgress;
  uint64_t bytes_done = 0;
  uint64_t bytes_total = 0;
  bool operator==(const LoadProgress&) const = default;
};

// The stage is ready; its memory, for the head's table, and what prompt batches cost it (Stage::time_batches),
// from which the head cuts prompts into micro-batches.
struct LoadDone {
  static constexpr MsgType kType = MsgType::LoadDone;
  uint64_t weights_bytes = 0;
  uint64_t kv_bytes = 0;
  uint64_t buffer_bytes = 0;
  struct Timing {
    uint32_t tokens = 0;
    float seconds = 0;
    bool operator==(const Timing&) const = default;
  };
  std::vector<Timing> batch_times;  // by increasing tokens
  bool operator==(const LoadDone&) const = default;
};

// Sampling for one sequence, done by the stage holding the output head (fields as in engine/sampler.h). With the
// sampler's whole state on the wire (random draws so far, penalty window) the stage keeps nothing between
// requests that it could not rebuild, and picks exactly the token the head's own sampler would.
struct SamplingParams {
  int32_t seq = 0;
  float temperature = 0.8f;
  int32_t top_k = 40;
  float top_p = 0.95f;
  float min_p = 0.05f;
  float repeat_penalty = 1.0f;
  int32_t repeat_last_n = 64;
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  uint64_t seed = 0;   // the seed in use (never "random": the head resolves that)
  uint64_t draws = 0;  // random numbers the sequence's sampler has drawn since its seed: the stream goes on from there
  std::vector<int32_t> history;  // accepted tokens in the penalty window, oldest first; empty without penalties
  bool logprobs = false;         // report the sampled token's logprob and the top_logprobs most likely tokens
  uint16_t top_logprobs = 0;
  // Grammar-constrained sampling (protocol 6): the grammar's text form ("" for none) and the generated tokens it
  // has accepted, from which the sampling stage rebuilds (or moves its cached) matcher.
  std::string grammar;
  std::vector<int32_t> grammar_tokens;
  bool operator==(const SamplingParams&) const = default;
};

// A micro-batch for one stage. Per token: seq, pos, want_output. Input: `tokens` (the first stage) and/or
// `activations` [n_tokens][n_embd] (later stages). `sampling` (last stage only) asks for the output token of
// those sequences to be sampled there, so only token ids come back instead of a row of logits.
struct Forward {
  static constexpr MsgType kType = MsgType::Forward;
  uint64_t request_id = 0;
  std::vector<int32_t> seq;
  std::vector<int32_t> pos;
  std::vector<uint8_t> want_output;  // 0 or 1
  std::vector<int32_t> tokens;       // empty or one per token
  std::optional<Activations> activations;
  std::vector<SamplingParams> sampling;  // at most one per sequence
  size_t n_tokens() const { return seq.size(); }
  bool operator==(const Forward&) const = default;
};

struct LogprobEntry {
  int32_t token = 0;
  float logprob = 0.0f;
  bool operator==(const LogprobEntry&) const = default;
};

struct SampledOutput {
  int32_t seq = 0;
  int32_t token = 0;
  bool has_logprob = false;
  float logprob = 0.0f;
  std::vector<LogprobEntry> top;  // best first
  bool operator==(const SampledOutput&) const = default;
};

// A stage's answer to Forward: `hidden` [n_tokens][n_embd] from a stage without the head; from the last stage
// `sampled` (output tokens of sequences with SamplingParams) and `logits` [n][n_vocab] (the other output tokens),
// both in batch order.
struct ForwardResult {
  static constexpr MsgType kType = MsgType::ForwardResult;
  uint64_t request_id = 0;
  std::optional<Activations> hidden;
  std::optional<Activations> logits;
  std::vector<SampledOutput> sampled;
  bool operator==(const ForwardResult&) const = default;
};

struct ClearSequence {
  static constexpr MsgType kType = MsgType::ClearSequence;
  int32_t seq = 0;
  bool operator==(const ClearSequence&) const = default;
};

// Keeps the first n positions of a sequence.
struct TruncateSequence {
  static constexpr MsgType kType = MsgType::TruncateSequence;
  int32_t seq = 0;
  int32_t n = 0;
  bool operator==(const TruncateSequence&) const = default;
};

// A worker's link to another worker, measured at the head's request (protocol 8): what a tensor-parallel group's
// collectives between the two would run over.
struct PeerLinkReport {
  std::string name;          // the peer as the head named it in ProbeRequest.peers
  float rtt_s = 0;           // median round trip; 0 with bytes 0 when the peer could not be reached (error says why)
  float up_bytes_per_s = 0;  // this worker -> peer
  float down_bytes_per_s = 0;
  std::string error;
  bool operator==(const PeerLinkReport&) const = default;
};

// The planner's view of a worker: the head asks for the worker's profile (as `tessera probe` measures it); the worker
// measures for about `seconds`, or answers from its own measurement when that is younger than max_age_s.
struct ProbeRequest {
  static constexpr MsgType kType = MsgType::ProbeRequest;
  float seconds = 1.0f;  // 0.05 to 60
  uint32_t max_age_s = 300;
  // Other workers this one measures its link to (a few pings and a short burst each way) and reports in
  // ProbeReply.peer_links: the worker-to-worker links a group's collectives take (protocol 8).
  std::vector<GroupMember> peers;
  bool operator==(const ProbeRequest&) const = default;
};

struct ProbeReply {
  static constexpr MsgType kType = MsgType::ProbeReply;
  uint32_t threads = 1;  // threads of the multi-threaded figures (the worker's -t)
  uint32_t cores = 1;    // logical CPUs the worker may run on
  float mem_read_gbps = 0;
  float mem_read_gbps_1t = 0;
  float int8_gops = 0;
  float f32_gflops = 0;
  uint64_t mem_total_bytes = 0;
  uint64_t mem_available_bytes = 0;  // read fresh for every request
  float age_s = 0;                   // age of the measured figures (0: measured for this request)
  std::string cpu;
  std::string isa;
  bool repack = false;  // the worker packs its weights at load (its --repack): the planner's batch rates and memory
  std::string machine;  // the worker's system (its boot id): nodes on one machine share its CPUs
  std::string cpus;     // the CPUs the worker may run on, "0-3,8"
  std::vector<PeerLinkReport> peer_links;  // one per ProbeRequest.peers, in its order
  // The whole machine's read rate, a reader on each of its CPUs (protocol 13): what nodes on one machine share.
  float machine_read_gbps = 0;
  // The quantized matmul's rate by tokens per pass, over the largest count's (protocol 13; hw/batch_rate.h).
  struct BatchRatePoint {
    uint32_t tokens = 0;
    float fraction = 0;
    bool operator==(const BatchRatePoint&) const = default;
  };
  std::vector<BatchRatePoint> batch_rates;
  bool operator==(const ProbeReply&) const = default;
};

// ---- Tensor/expert parallel groups over the worker links (protocol 7; docs/parallel.md, "Over worker links") ----

// Head -> worker: join a group as `rank`, opening the model from the worker's --models folder (or taking its share:
// ShareRequest) and linking to the other workers (a member dials the workers ranked below it and accepts those above),
// then follow rank 0.
struct GroupJoin {
  static constexpr MsgType kType = MsgType::GroupJoin;
  uint64_t group_id = 0;  // random, names this group in the peers' GroupLink
  uint32_t rank = 1;
  std::vector<GroupMember> members;  // by rank; members[0] is the head
  std::string file_name;             // base name of the head's GGUF
  uint64_t file_size = 0;
  Hash128 model_hash{};  // the model's identity (cluster/model_identity.h)
  bool tp = false;
  bool ep = false;
  std::string shares;       // --tp-shares text ("" : equal)
  float ep_redundancy = 0;  // --ep-redundancy (ShardSpec)
  uint32_t n_slots = 1;
  uint32_t n_ctx = 0;
  GgmlType kv_type = GgmlType::F16;
  WireType wire_type = WireType::F32;  // the partial sums of the all-reduces
  uint16_t threads = 0;                // 0: the worker's own -t
  bool exact_gelu = false;
  bool profile = false;     // every member probes its machine at start (the plan); a collective, so all or none
  float timeout_s = 30.0f;  // --collective-timeout
  // The layers [layer_begin, layer_end) of a pipeline stage held by the group (protocol 11); 0, 0: every layer.
  uint32_t layer_begin = 0;
  uint32_t layer_end = 0;
  bool operator==(const GroupJoin&) const = default;
};

// Worker -> head: linked to every peer, model open, ready to follow.
struct GroupReady {
  static constexpr MsgType kType = MsgType::GroupReady;
  uint64_t group_id = 0;
  std::string weights_from;  // for the head's log: "its --models copy", "its cache", "the head (N bytes)"
  bool operator==(const GroupReady&) const = default;
};

// Peer -> worker, the first message on a link between two workers of a group: who dials.
struct GroupLink {
  static constexpr MsgType kType = MsgType::GroupLink;
  uint64_t group_id = 0;
  uint32_t rank = 0;
  bool operator==(const GroupLink&) const = default;
};

// One piece of a collective between two members: `op` names the collective (a receiver in another one fails),
// `seq` counts the pieces on this link, so a lost or extra piece is an error rather than a wrong sum.
struct CollectiveData {
  static constexpr MsgType kType = MsgType::CollectiveData;
  uint16_t op = 1;
  uint64_t seq = 0;
  std::vector<uint8_t> payload;
  bool operator==(const CollectiveData&) const = default;
};

// ---- A member without the model receives just its share (protocol 9; docs/parallel.md, "Members without the model")
// ----

// Worker -> head, instead of GroupReady: this member has no copy of the model (nor its share in its cache); the head
// answers ShareTable.
struct ShareRequest {
  static constexpr MsgType kType = MsgType::ShareRequest;
  uint64_t group_id = 0;
  bool operator==(const ShareRequest&) const = default;
};

// `count` runs of `bytes`, `stride` apart, from `offset` of tensor `tensor` (an index into ShareTable::tensors).
struct ShareRun {
  uint32_t tensor = 0;
  uint64_t offset = 0;
  uint64_t bytes = 0;
  uint64_t stride = 0;
  uint64_t count = 1;
  bool operator==(const ShareRun&) const = default;
};

// Head -> worker: the model's metadata and tensor table, and the runs of bytes this member's share reads; their
// bytes follow, in run order, as WeightChunks named by `key` once the worker says ShareAccept.
struct ShareTable {
  static constexpr MsgType kType = MsgType::ShareTable;
  uint64_t group_id = 0;
  Hash128 key{};         // names the share: model identity, layout, rank (the worker's cache keeps it under this)
  Hash128 share_hash{};  // XXH3-128 over the share's bytes in run order
  std::vector<uint8_t> model_metadata;  // as LoadStage's, tokenizer included
  std::vector<TensorInfo> tensors;      // every tensor of the model (hash unused: zero)
  std::vector<ShareRun> runs;
  bool operator==(const ShareTable&) const = default;
};

// Worker -> head: the share fits (--mem-limit): send it.
struct ShareAccept {
  static constexpr MsgType kType = MsgType::ShareAccept;
  uint64_t group_id = 0;
  bool operator==(const ShareAccept&) const = default;
};

using Message =
    std::variant<Hello, HelloAck, Heartbeat, Ping, Pong, ErrorMsg, Bye, LoadStage, LoadReply, WeightChunk, LoadProgress,
                 LoadDone, Forward, ForwardResult, ClearSequence, TruncateSequence, ProbeRequest, ProbeReply, GroupJoin,
                 GroupReady, GroupLink, CollectiveData, ShareRequest, ShareTable, ShareAccept>;

MsgType type_of(const Message& message);

// An Error message whose text is made valid (wire_text, at most kMaxErrorText bytes, never empty).
ErrorMsg error_message(ErrorCode code, std::string_view text, uint64_t request_id = 0);

inline constexpr size_t kFrameHeaderBytes = 8;

struct FrameHeader {
  MsgType type;
  uint32_t body_bytes;
};

// Validates a frame header: known type, zero flags, body within the type's limit. Throws Error otherwise.
FrameHeader parse_frame_header(std::span<const uint8_t, kFrameHeaderBytes> header);
void write_frame_header(MsgType type, size_t body_bytes, uint8_t* out);

// The body alone. encode_body validates what it writes as decode_body would, so a bad message fails at the sender.
std::vector<uint8_t> encode_body(const Message& message);
Message decode_body(MsgType type, std::span<const uint8_t> body);

// Header + body in one buffer (tests, the fuzzer, and senders of small messages).
std::vector<uint8_t> encode_frame(const Message& message);
// The same into `out`, reusing its capacity (a sender's buffer).
void encode_frame(const Message& message, std::vector<uint8_t>& out);
// Exactly one frame; anything else (short, long, bad header, bad body) throws Error.
Message decode_frame(std::span<const uint8_t> frame);

}  // namespace tessera::net
