// The first exchange on a connection: the dialler (a head) sends Hello, the listener (a worker) answers HelloAck,
// accepting or refusing with a reason. The worker's policy (busy with another head, ...) belongs to the worker;
// these helpers carry it and make the standard checks (protocol version, role).
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include "net/messages.h"
#include "net/transport.h"

namespace tessera::net {

// This build's version ("0.1.0"), sent in Hello and HelloAck.
std::string_view software_version();

// A Hello for this node (current protocol and software version). Throws Error for an invalid node name.
Hello make_hello(Role role, std::string_view node_name);

// An accepting answer from `self`.
HelloAck accept_hello(const Hello& self);
// A refusal from `self`; `reason` is shown to the peer's user ("busy: serving head h1").
HelloAck refuse_hello(const Hello& self, HelloStatus status, std::string_view reason);
// The checks every listener makes: the same protocol version, and a peer of the other role. Returns the refusal
// to send, or nullopt when the peer may proceed (the caller may still refuse, e.g. when busy).
std::optional<HelloAck> check_hello(const Hello& peer, const Hello& self);

// Dialler side: sends Hello, waits for HelloAck, names the peer on the connection. Throws Error naming the peer
// and its reason when refused, and when the peer answers with anything else or not in time.
HelloAck client_handshake(Connection& connection, const Hello& self, std::chrono::milliseconds timeout);

// Listener side: waits for the peer's Hello (anything else first is a protocol error) and names the peer on the
// connection. The caller decides, then sends accept_hello/refuse_hello (and closes after a refusal).
Hello receive_hello(Connection& connection, std::chrono::milliseconds timeout);

}  // namespace tessera::net
