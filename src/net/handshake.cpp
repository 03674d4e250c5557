// Hello/HelloAck: version and role checks, refusals with reasons, peer naming.
#include "net/handshake.h"

#include <fmt/format.h>

#include "util/error.h"

namespace tessera::net {

std::string_view software_version() { return TESSERA_VERSION; }

Hello make_hello(Role role, std::string_view node_name) {
  Hello h;
  h.role = role;
  h.node_name = std::string(node_name);
  h.software_version = std::string(software_version());
  if (h.node_name.empty() || h.node_name.size() > kMaxNodeName || check_charset(h.node_name, Charset::NodeName)) {
    fail("node name '{}' is not valid: 1 to {} letters, digits, '.', '_' or '-'", node_name, kMaxNodeName);
  }
  return h;
}

HelloAck accept_hello(const Hello& self) {
  HelloAck ack;
  ack.status = HelloStatus::Accepted;
  ack.node_name = self.node_name;
  ack.software_version = self.software_version;
  return ack;
}

HelloAck refuse_hello(const Hello& self, HelloStatus status, std::string_view reason) {
  if (status == HelloStatus::Accepted) fail("refuse_hello needs a refusal status");
  HelloAck ack = accept_hello(self);
  ack.status = status;
  ack.reason = wire_text(reason, kMaxReason);
  if (ack.reason.empty()) ack.reason = std::string(hello_status_name(status));
  return ack;
}

std::optional<HelloAck> check_hello(const Hello& peer, const Hello& self) {
  if (peer.protocol_version != self.protocol_version) {
    return refuse_hello(
        self, HelloStatus::VersionMismatch,
        fmt::format("protocol version {}, expected {} (peer runs tessera {}, this node {})", peer.protocol_version,
                    self.protocol_version, peer.software_version, self.software_version));
  }
  if (peer.role == self.role) {
    return refuse_hello(self, HelloStatus::BadRole,
                        fmt::format("both nodes are {}s; a {} talks to a {}", role_name(self.role),
                                    role_name(Role::Head), role_name(Role::Worker)));
  }
  return std::nullopt;
}

HelloAck client_handshake(Connection& connection, const Hello& self, std::chrono::milliseconds timeout) {
  connection.send(self);
  const std::string address = connection.address();
  auto reply = connection.recv(timeout);
  if (!reply) {
    fail("{}: no answer to Hello within {:.1f} s", address, std::chrono::duration<double>(timeout).count());
  }
  if (const auto* error = std::get_if<ErrorMsg>(&*reply)) {
    fail("{} refused the connection: {}", address, error->message);
  }
  const auto* ack = std::get_if<HelloAck>(&*reply);
  if (ack == nullptr) fail("{}: expected HelloAck, got {}", address, msg_type_name(type_of(*reply)));
  // A head or a group peer dials a worker; a worker dials no one else.
  connection.set_peer_identity(self.role == Role::Worker ? Role::Head : Role::Worker, ack->node_name);
  if (!ack->accepted()) {
    fail("{} refused the connection ({}): {}", connection.peer(), hello_status_name(ack->status), ack->reason);
  }
  // A peer that accepted must speak our version; one from the future that does not check is caught here.
  if (ack->protocol_version != self.protocol_version) {
    fail("{} speaks protocol version {}, this node {} (peer runs tessera {}, this node {})", connection.peer(),
         ack->protocol_version, self.protocol_version, ack->software_version, self.software_version);
  }
  return *ack;
}

Hello receive_hello(Connection& connection, std::chrono::milliseconds timeout) {
  auto first = connection.recv(timeout);
  if (!first) {
    fail("{}: no Hello within {:.1f} s", connection.address(), std::chrono::duration<double>(timeout).count());
  }
  const auto* hello = std::get_if<Hello>(&*first);
  if (hello == nullptr) {
    const std::string got(msg_type_name(type_of(*first)));
    try {
      connection.send(error_message(ErrorCode::Protocol, fmt::format("expected Hello first, got {}", got)));
    } catch (const Error&) {
      // The peer is told when possible; the caller learns from the exception below either way.
    }
    fail("{}: expected Hello first, got {}", connection.address(), got);
  }
  connection.set_peer_identity(hello->role, hello->node_name);
  return *hello;
}

}  // namespace tessera::net
