// Transport on 127.0.0.1: plain and TLS links exchange messages both ways; wrong or missing keys are refused
// clearly; dead peers (silent or closed) are noticed within seconds; size limits; handshake refusals; link
// measurement. Only loopback addresses are ever bound or dialled.
#include <arpa/inet.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <future>
#include <thread>

#include "net/handshake.h"
#include "net/link_measure.h"
#include "net/transport.h"
#include "util/error.h"

namespace tessera::net {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::string error_text(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

struct Pair {
  std::unique_ptr<Listener> listener;
  std::unique_ptr<Connection> server;  // accepted side
  std::unique_ptr<Connection> client;  // dialling side
};

Pair make_link(const ClusterKey* server_key, const ClusterKey* client_key, const TransportOptions& server_options = {},
               const TransportOptions& client_options = {}) {
  Pair p;
  p.listener = std::make_unique<Listener>("127.0.0.1:0", server_key, server_options);
  auto accepted = std::async(std::launch::async, [&] { return p.listener->accept(5s); });
  p.client = connect(p.listener->endpoint(), client_key, 5s, client_options);
  p.server = accepted.get();
  EXPECT_NE(p.server, nullptr);
  return p;
}

// A raw TCP socket to a plain listener, for peers that misbehave in ways a Connection never would.
int silent_connect(const std::string& endpoint);

int raw_connect(const std::string& endpoint) {
  const int fd = silent_connect(endpoint);
  const uint8_t preamble[8] = {'T', 'S', 'R', 'A', 1, 0, 0, 0};  // plain transport
  EXPECT_EQ(::send(fd, preamble, 8, MSG_NOSIGNAL), 8);
  uint8_t reply[8];
  EXPECT_EQ(::recv(fd, reply, 8, MSG_WAITALL), 8);
  return fd;
}

// A TCP connection that never says anything.
int silent_connect(const std::string& endpoint) {
  const auto colon = endpoint.rfind(':');
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(std::stoi(endpoint.substr(colon + 1))));
  inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  return fd;
}

void exchange_both_ways(Pair& p) {
  Forward f;
  f.request_id = 7;
  f.seq = {0, 1};
  f.pos = {0, 0};
  f.want_output = {1, 1};
  f.activations = encode_activations(std::vector<float>(2 * 16, 0.5f), 2, 16, WireType::F16);
  p.client->send(f);
  auto got = p.server->recv(5s);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(std::get<Forward>(*got), f);

  ForwardResult r;
  r.request_id = 7;
  r.sampled = {{0, 3, true, -0.25f, {{3, -0.25f}}}, {1, 4, false, 0.0f, {}}};
  p.server->send(r);
  got = p.client->recv(5s);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(std::get<ForwardResult>(*got), r);

  // A large message crosses in pieces and arrives whole.
  WeightChunk chunk{{1, 2, 3}, 0, std::vector<uint8_t>(8u << 20)};
  for (size_t i = 0; i < chunk.data.size(); ++i) chunk.data[i] = static_cast<uint8_t>(i * 31 + (i >> 12));
  auto sending = std::async(std::launch::async, [&] { p.client->send(chunk); });
  got = p.server->recv(10s);
  sending.get();
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(std::get<WeightChunk>(*got), chunk);

  const LinkStats cs = p.client->stats();
  const LinkStats ss = p.server->stats();
  EXPECT_EQ(cs.messages_sent, 2u);
  EXPECT_EQ(cs.messages_received, 1u);
  EXPECT_EQ(ss.messages_received, 2u);
  EXPECT_GT(cs.bytes_sent, 8u << 20);
  EXPECT_GE(ss.bytes_received, cs.bytes_sent - 64);  // all but heartbeats in flight
}

TEST(Transport, PlainLoopbackExchangesBothWays) {
  Pair p = make_link(nullptr, nullptr);
  ASSERT_TRUE(p.server && p.client);
  EXPECT_FALSE(p.client->encrypted());
  EXPECT_FALSE(p.listener->encrypted());
  exchange_both_ways(p);
}

TEST(Transport, TlsWithTheClusterKeyExchangesBothWays) {
  const ClusterKey key = ClusterKey::generate();
  Pair p = make_link(&key, &key);
  ASSERT_TRUE(p.server && p.client);
  EXPECT_TRUE(p.client->encrypted());
  EXPECT_TRUE(p.server->encrypted());
  exchange_both_ways(p);
}

TEST(Transport, WrongKeyIsRefusedQuicklyAndClearly) {
  const ClusterKey server_key = ClusterKey::generate();
  const ClusterKey client_key = ClusterKey::generate();
  Listener listener("127.0.0.1:0", &server_key);
  auto accepted = std::async(std::launch::async, [&] { return listener.accept(1500ms); });
  const auto start = Clock::now();
  const std::string e = error_text([&] { connect(listener.endpoint(), &client_key, 5s); });
  EXPECT_LT(seconds_since(start), 3.0);
  EXPECT_TRUE(contains(e, "authentication failed")) << e;
  EXPECT_TRUE(contains(e, listener.endpoint())) << e;
  EXPECT_TRUE(contains(e, client_key.fingerprint())) << e;
  EXPECT_EQ(accepted.get(), nullptr);
  EXPECT_EQ(listener.refused(), 1u);
  EXPECT_TRUE(contains(listener.last_refusal(), "authentication failed")) << listener.last_refusal();
}

// Peers that connect and say nothing wait for their preambles side by side: 200 of them cost a real node nothing, and
// each is dropped after the handshake timeout.
TEST(Transport, SilentPeersDoNotDelayARealOne) {
  const ClusterKey key = ClusterKey::generate();
  TransportOptions o;
  o.handshake_timeout = 1500ms;
  Listener listener("127.0.0.1:0", &key, o);
  // The node's accept loop runs while the peers arrive, as a worker's does.
  auto accepted = std::async(std::launch::async, [&] {
    std::unique_ptr<Connection> c;
    const auto until = Clock::now() + 10s;
    while (!c && Clock::now() < until) c = listener.accept(200ms);
    return c;
  });
  std::vector<int> silent;
  for (int i = 0; i < 200; ++i) {
    const int fd = silent_connect(listener.endpoint());
    ASSERT_GE(fd, 0);
    silent.push_back(fd);
  }
  const auto start = Clock::now();
  auto client = connect(listener.endpoint(), &key, 5s);
  EXPECT_LT(seconds_since(start), 2.0);
  auto server = accepted.get();
  ASSERT_NE(server, nullptr);
  // The silent ones are dropped once their time is up (the refusals name why), without flooding the log.
  std::this_thread::sleep_for(2s);
  EXPECT_EQ(listener.accept(100ms), nullptr);
  EXPECT_GE(listener.refused(), 200u);
  EXPECT_TRUE(contains(listener.last_refusal(), "no preamble")) << listener.last_refusal();
  for (int fd : silent) ::close(fd);
}

TEST(Transport, KeyOnOneSideOnlyIsExplained) {
  const ClusterKey key = ClusterKey::generate();
  {
    Listener listener("127.0.0.1:0", &key);
    auto accepted = std::async(std::launch::async, [&] { return listener.accept(1500ms); });
    const std::string e = error_text([&] { connect(listener.endpoint(), nullptr, 5s); });
    EXPECT_TRUE(contains(e, "requires a cluster key")) << e;
    EXPECT_EQ(accepted.get(), nullptr);
    EXPECT_TRUE(contains(listener.last_refusal(), "has no cluster key")) << listener.last_refusal();
  }
  {
    Listener listener("127.0.0.1:0", nullptr);
    auto accepted = std::async(std::launch::async, [&] { return listener.accept(1500ms); });
    const std::string e = error_text([&] { connect(listener.endpoint(), &key, 5s); });
    EXPECT_TRUE(contains(e, "runs without a cluster key")) << e;
    EXPECT_EQ(accepted.get(), nullptr);
  }
}

TEST(Transport, NonLoopbackListenerWithoutKeyIsRefused) {
  // Refused before any socket is created: nothing is bound on the wildcard address.
  const std::string e = error_text([] { Listener("0.0.0.0:0", nullptr); });
  EXPECT_TRUE(contains(e, "without a cluster key")) << e;
  EXPECT_TRUE(contains(e, "0.0.0.0:0")) << e;
  EXPECT_TRUE(contains(error_text([] { Listener("127.0.0.1", nullptr); }), "HOST:PORT"));
  EXPECT_TRUE(contains(error_text([] { Listener("127.0.0.1:99999", nullptr); }), "port"));
}

TEST(Transport, ConnectionRefusedIsReported) {
  std::string endpoint;
  {
    Listener listener("127.0.0.1:0", nullptr);
    endpoint = listener.endpoint();
  }
  const auto start = Clock::now();
  const std::string e = error_text([&] { connect(endpoint, nullptr, 2s); });
  EXPECT_LT(seconds_since(start), 2.5);
  EXPECT_TRUE(contains(e, "cannot connect to " + endpoint)) << e;
}

TEST(Transport, HeartbeatsKeepAnIdleLinkAlive) {
  Pair p = make_link(nullptr, nullptr);
  ASSERT_TRUE(p.server && p.client);
  // Longer than dead_after with no traffic but heartbeats: no error, just a timeout.
  auto client_side = std::async(std::launch::async, [&] { return p.client->recv(3500ms).has_value(); });
  EXPECT_FALSE(p.server->recv(3500ms).has_value());
  EXPECT_FALSE(client_side.get());
  EXPECT_GE(p.server->stats().heartbeats_received, 2u);
  EXPECT_GE(p.client->stats().heartbeats_sent, 2u);
  EXPECT_EQ(p.server->stats().messages_received, 0u);
}

TEST(Transport, SilentPeerIsDetectedWithinSeconds) {
  TransportOptions silent;
  silent.heartbeat_interval = 0ms;  // a peer that hangs: connected, but sends nothing
  Pair p = make_link(nullptr, nullptr, {}, silent);
  ASSERT_TRUE(p.server && p.client);
  p.client->send(make_hello(Role::Head, "h1"));
  const Hello hello = receive_hello(*p.server, 2s);
  EXPECT_EQ(hello.node_name, "h1");
  const auto start = Clock::now();
  const std::string e = error_text([&] { p.server->recv(10s); });
  const double took = seconds_since(start);
  EXPECT_GT(took, 2.5);
  EXPECT_LT(took, 5.0);
  EXPECT_TRUE(contains(e, "head h1 (127.0.0.1:")) << e;
  EXPECT_TRUE(contains(e, "no heartbeat for 3.")) << e;
  // The failure sticks.
  EXPECT_TRUE(contains(error_text([&] { p.server->recv(1s); }), "no heartbeat")) << e;
}

TEST(Transport, ClosedPeerIsDetectedAtOnce) {
  Pair p = make_link(nullptr, nullptr);
  ASSERT_TRUE(p.server && p.client);
  p.client->close("done");
  const auto start = Clock::now();
  auto bye = p.server->recv(5s);
  ASSERT_TRUE(bye.has_value());
  EXPECT_EQ(std::get<Bye>(*bye).reason, "done");
  const std::string e = error_text([&] { p.server->recv(5s); });
  EXPECT_LT(seconds_since(start), 1.0);
  EXPECT_TRUE(contains(e, "closed the connection (done)")) << e;
  EXPECT_TRUE(contains(error_text([&] { p.client->send(Heartbeat{}); }), "closed"));
}

TEST(Transport, AbruptlyClosedSocketIsDetectedAtOnce) {
  Listener listener("127.0.0.1:0", nullptr);
  auto accepted = std::async(std::launch::async, [&] { return listener.accept(5s); });
  const int fd = raw_connect(listener.endpoint());
  auto server = accepted.get();
  ASSERT_NE(server, nullptr);
  const auto start = Clock::now();
  ::close(fd);
  const std::string e = error_text([&] { server->recv(5s); });
  EXPECT_LT(seconds_since(start), 1.0);
  // FIN or, when unread bytes were pending on the closed side, RST.
  EXPECT_TRUE(contains(e, "connection closed by the peer") || contains(e, "connection lost")) << e;
  EXPECT_TRUE(contains(e, "127.0.0.1:")) << e;
}

TEST(Transport, OversizedFrameIsRefusedFromItsHeader) {
  Listener listener("127.0.0.1:0", nullptr);
  auto accepted = std::async(std::launch::async, [&] { return listener.accept(5s); });
  const int fd = raw_connect(listener.endpoint());
  auto server = accepted.get();
  ASSERT_NE(server, nullptr);
  // A WeightChunk header claiming 1 GiB: refused before any body byte is read or buffer allocated.
  uint8_t header[8];
  write_frame_header(MsgType::WeightChunk, 16, header);
  const uint32_t huge = 1u << 30;
  std::memcpy(header, &huge, 4);
  ASSERT_EQ(::send(fd, header, 8, MSG_NOSIGNAL), 8);
  const std::string e = error_text([&] { server->recv(5s); });
  EXPECT_TRUE(contains(e, "WeightChunk of 1073741824 bytes exceeds its limit")) << e;
  ::close(fd);
}

TEST(Transport, GarbageAndUnknownTypesAreProtocolErrors) {
  Listener listener("127.0.0.1:0", nullptr);
  auto accepted = std::async(std::launch::async, [&] { return listener.accept(5s); });
  const int fd = raw_connect(listener.endpoint());
  auto server = accepted.get();
  ASSERT_NE(server, nullptr);
  const uint8_t bad[8] = {0, 0, 0, 0, 0x99, 0, 0, 0};
  ASSERT_EQ(::send(fd, bad, 8, MSG_NOSIGNAL), 8);
  const std::string e = error_text([&] { server->recv(5s); });
  EXPECT_TRUE(contains(e, "unknown message type 153")) << e;
  ::close(fd);
}

TEST(Transport, SendRefusesInvalidOrOversizedMessages) {
  Pair p = make_link(nullptr, nullptr);
  ASSERT_TRUE(p.server && p.client);
  Ping big{1, 0, std::vector<uint8_t>(kMaxPingBytes + 1)};
  EXPECT_TRUE(contains(error_text([&] { p.client->send(big); }), "exceeds the limit"));
  EXPECT_TRUE(contains(error_text([&] { p.client->send(ClearSequence{-1}); }), "ClearSequence"));
  // Refusing to send does not break the link.
  p.client->send(ClearSequence{2});
  auto got = p.server->recv(5s);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(std::get<ClearSequence>(*got).seq, 2);
}

TEST(Handshake, AcceptedHelloNamesBothPeers) {
  Pair p = make_link(nullptr, nullptr);
  ASSERT_TRUE(p.server && p.client);
  const Hello worker = make_hello(Role::Worker, "wb");
  auto server_side = std::async(std::launch::async, [&] {
    const Hello h = receive_hello(*p.server, 5s);
    EXPECT_FALSE(check_hello(h, worker).has_value());
    p.server->send(accept_hello(worker));
    return h;
  });
  const HelloAck ack = client_handshake(*p.client, make_hello(Role::Head, "h1"), 5s);
  EXPECT_TRUE(ack.accepted());
  EXPECT_EQ(ack.node_name, "wb");
  EXPECT_EQ(ack.software_version, software_version());
  EXPECT_EQ(server_side.get().node_name, "h1");
  EXPECT_TRUE(contains(p.client->peer(), "worker wb (127.0.0.1:")) << p.client->peer();
  EXPECT_TRUE(contains(p.server->peer(), "head h1 (127.0.0.1:")) << p.server->peer();
}

// The worker side refuses with `ack`; returns the dialler's error.
std::string refused_with(const Hello& head, const std::function<HelloAck(const Hello&)>& decide) {
  Pair p = make_link(nullptr, nullptr);
  auto server_side = std::async(std::launch::async, [&] {
    const Hello h = receive_hello(*p.server, 5s);
    p.server->send(decide(h));
    p.server->close("refused");
  });
  const std::string e = error_text([&] { client_handshake(*p.client, head, 5s); });
  server_side.get();
  return e;
}

TEST(Handshake, VersionMismatchIsReportedClearly) {
  const Hello worker = make_hello(Role::Worker, "wb");
  Hello future = make_hello(Role::Head, "h1");
  future.protocol_version = kProtocolVersion + 1;
  const std::string e = refused_with(future, [&](const Hello& h) {
    auto refusal = check_hello(h, worker);
    EXPECT_TRUE(refusal.has_value());
    return refusal.value_or(accept_hello(worker));
  });
  EXPECT_TRUE(contains(e, "worker wb (127.0.0.1:")) << e;
  EXPECT_TRUE(contains(e, "version mismatch")) << e;
  EXPECT_TRUE(contains(e, fmt::format("protocol version {}, expected {}", kProtocolVersion + 1, kProtocolVersion)))
      << e;
}

TEST(Handshake, BusyWorkerRefusesASecondHead) {
  const Hello worker = make_hello(Role::Worker, "wb");
  const std::string e = refused_with(make_hello(Role::Head, "h2"), [&](const Hello&) {
    return refuse_hello(worker, HelloStatus::Busy, "busy: serving head h1");
  });
  EXPECT_TRUE(contains(e, "refused the connection (busy): busy: serving head h1")) << e;
}

TEST(Handshake, SameRolesAreRefused) {
  const Hello worker = make_hello(Role::Worker, "wb");
  const std::string e = refused_with(make_hello(Role::Worker, "wc"), [&](const Hello& h) {
    return check_hello(h, worker).value_or(accept_hello(worker));
  });
  EXPECT_TRUE(contains(e, "both nodes are workers")) << e;
  EXPECT_TRUE(contains(error_text([] { make_hello(Role::Head, "bad name"); }), "node name"));
}

TEST(Handshake, SomethingOtherThanHelloFirstIsAProtocolError) {
  Pair p = make_link(nullptr, nullptr);
  p.client->send(ClearSequence{0});
  const std::string e = error_text([&] { receive_hello(*p.server, 5s); });
  EXPECT_TRUE(contains(e, "expected Hello first, got ClearSequence")) << e;
  auto told = p.client->recv(5s);
  ASSERT_TRUE(told.has_value());
  EXPECT_EQ(std::get<ErrorMsg>(*told).code, ErrorCode::Protocol);
}

TEST(LinkMeasure, LoopbackGivesPositiveRttAndBandwidth) {
  const ClusterKey key = ClusterKey::generate();
  Pair p = make_link(&key, &key);
  ASSERT_TRUE(p.server && p.client);
  // The worker side only has to keep receiving: Pings are answered inside recv.
  auto server_side = std::async(std::launch::async, [&] {
    for (;;) {
      auto m = p.server->recv(10s);
      if (!m || std::holds_alternative<Bye>(*m)) return;
    }
  });
  const LinkMeasurement m = measure_link(*p.client);
  p.client->close();
  server_side.get();
  EXPECT_GT(m.rtt_s, 0.0);
  EXPECT_LT(m.rtt_s, 0.5);
  EXPECT_GT(m.upload_bytes_per_s, 1e6);  // loopback TLS moves far more than a MB/s
  EXPECT_GT(m.download_bytes_per_s, 1e6);
  EXPECT_EQ(m.transfer_bytes, 8u << 20);
  EXPECT_TRUE(contains(describe(m), "rtt ")) << describe(m);
}

}  // namespace
}  // namespace tessera::net
