// The wire's names and limits: message, role, status and error names for logs and errors, the body size allowed
// per message type, and ErrorMsg construction.
#include "net/codec.h"
#include "net/messages.h"

namespace tessera::net {

std::string_view msg_type_name(MsgType type) {
  switch (type) {
    case MsgType::Hello:
      return "Hello";
    case MsgType::HelloAck:
      return "HelloAck";
    case MsgType::Heartbeat:
      return "Heartbeat";
    case MsgType::Ping:
      return "Ping";
    case MsgType::Pong:
      return "Pong";
    case MsgType::Error:
      return "Error";
    case MsgType::Bye:
      return "Bye";
    case MsgType::LoadStage:
      return "LoadStage";
    case MsgType::LoadReply:
      return "LoadReply";
    case MsgType::WeightChunk:
      return "WeightChunk";
    case MsgType::LoadProgress:
      return "LoadProgress";
    case MsgType::LoadDone:
      return "LoadDone";
    case MsgType::Forward:
      return "Forward";
    case MsgType::ForwardResult:
      return "ForwardResult";
    case MsgType::ClearSequence:
      return "ClearSequence";
    case MsgType::TruncateSequence:
      return "TruncateSequence";
    case MsgType::ProbeRequest:
      return "ProbeRequest";
    case MsgType::ProbeReply:
      return "ProbeReply";
    case MsgType::GroupJoin:
      return "GroupJoin";
    case MsgType::GroupReady:
      return "GroupReady";
    case MsgType::GroupLink:
      return "GroupLink";
    case MsgType::CollectiveData:
      return "CollectiveData";
    case MsgType::ShareRequest:
      return "ShareRequest";
    case MsgType::ShareTable:
      return "ShareTable";
    case MsgType::ShareAccept:
      return "ShareAccept";
  }
  return "?";
}

std::optional<MsgType> msg_type_from_id(uint16_t id) {
  const auto type = static_cast<MsgType>(id);
  if (msg_type_name(type) == "?") return std::nullopt;
  return type;
}

size_t max_body_bytes(MsgType type) {
  constexpr size_t kSmall = 64u << 10;
  constexpr size_t kSlack = 64u << 10;  // headers and small fields around a large payload
  switch (type) {
    case MsgType::Ping:
    case MsgType::Pong:
      return kMaxPingBytes + kSlack;
    case MsgType::LoadStage:
    case MsgType::ShareTable:
      return 64u << 20;
    case MsgType::LoadReply:
      return 2 * 16 * kMaxTensors + kSlack;
    case MsgType::WeightChunk:
    case MsgType::CollectiveData:
      return kMaxChunkBytes + kSlack;
    case MsgType::Forward:
    case MsgType::ForwardResult:
      return kMaxChunkBytes + (16u << 20);  // the matrix plus per-token fields and logprobs
    default:
      return kSmall;
  }
}

std::string_view role_name(Role role) {
  switch (role) {
    case Role::Head:
      return "head";
    case Role::Worker:
      return "worker";
    case Role::Peer:
      return "group peer";
  }
  return "?";
}

std::string_view hello_status_name(HelloStatus status) {
  switch (status) {
    case HelloStatus::Accepted:
      return "accepted";
    case HelloStatus::VersionMismatch:
      return "version mismatch";
    case HelloStatus::Busy:
      return "busy";
    case HelloStatus::BadRole:
      return "wrong role";
    case HelloStatus::Refused:
      return "refused";
  }
  return "?";
}

std::string_view error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::Protocol:
      return "protocol error";
    case ErrorCode::BadRequest:
      return "bad request";
    case ErrorCode::LoadFailed:
      return "load failed";
    case ErrorCode::OutOfMemory:
      return "out of memory";
    case ErrorCode::Internal:
      return "internal error";
  }
  return "?";
}

ErrorMsg error_message(ErrorCode code, std::string_view text, uint64_t request_id) {
  ErrorMsg m{code, wire_text(text, kMaxErrorText), request_id};
  if (m.message.empty()) m.message = std::string(error_code_name(code));
  return m;
}

}  // namespace tessera::net
