// A frame's 8-byte header: body length, message type and flags, checked against each type's size limit on both
// the receiving and the sending side.
#include <cstring>

#include "net/messages.h"
#include "util/error.h"

namespace tessera::net {

FrameHeader parse_frame_header(std::span<const uint8_t, kFrameHeaderBytes> header) {
  uint32_t length;
  uint16_t id;
  uint16_t flags;
  std::memcpy(&length, header.data(), 4);
  std::memcpy(&id, header.data() + 4, 2);
  std::memcpy(&flags, header.data() + 6, 2);
  const auto type = msg_type_from_id(id);
  if (!type) fail("bad frame: unknown message type {} (this node speaks protocol {})", id, kProtocolVersion);
  if (flags != 0) fail("bad frame: {} with flags 0x{:04x} (must be 0)", msg_type_name(*type), flags);
  if (length > max_body_bytes(*type)) {
    fail("bad frame: {} of {} bytes exceeds its limit of {} bytes", msg_type_name(*type), length,
         max_body_bytes(*type));
  }
  return {*type, length};
}

void write_frame_header(MsgType type, size_t body_bytes, uint8_t* out) {
  if (body_bytes > max_body_bytes(type)) {
    fail("cannot send {} of {} bytes: its limit is {} bytes", msg_type_name(type), body_bytes, max_body_bytes(type));
  }
  const auto length = static_cast<uint32_t>(body_bytes);
  const auto id = static_cast<uint16_t>(type);
  const uint16_t flags = 0;
  std::memcpy(out, &length, 4);
  std::memcpy(out + 4, &id, 2);
  std::memcpy(out + 6, &flags, 2);
}

}  // namespace tessera::net
