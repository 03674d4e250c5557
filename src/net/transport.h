// Links between nodes: a Listener accepts and connect() dials authenticated, encrypted connections (TLS 1.3 with a
// PSK derived from the cluster key; plain TCP only on loopback without a key) that carry framed wire messages.
// Each Connection owns one thread, its heartbeat sender, started in the constructor and joined by close().
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "net/keys.h"
#include "net/messages.h"

namespace tessera::net {

namespace detail {
class Stream;
class TlsContext;
class Socket;
}  // namespace detail

struct TransportOptions {
  // A Heartbeat goes out when nothing else was sent for this long (0: never; tests use it to play a hung peer).
  std::chrono::milliseconds heartbeat_interval{1000};
  // Silence from the peer for this long (while recv waits) means it is gone.
  std::chrono::milliseconds dead_after{3000};
  // A send that moves no byte for this long fails: the peer stopped reading.
  std::chrono::milliseconds send_stall{30000};
  // Listener side: the preamble and TLS handshake of one incoming connection.
  std::chrono::milliseconds handshake_timeout{5000};
};

// Payload and frame-header bytes and messages; heartbeats are counted apart.
struct LinkStats {
  uint64_t bytes_sent = 0;
  uint64_t bytes_received = 0;
  uint64_t messages_sent = 0;
  uint64_t messages_received = 0;
  uint64_t heartbeats_sent = 0;
  uint64_t heartbeats_received = 0;
};

class Connection {
 public:
  // Made by Listener::accept and connect(); `address` is the peer's "host:port".
  Connection(std::unique_ptr<detail::Stream> stream, std::string address, const TransportOptions& options);
  ~Connection();  // close()
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Sends one message (any thread; sends are serialised). Throws Error when the message is invalid or over its
  // size limit, or when the peer is gone or stops reading.
  void send(const Message& message);
  // The next message, or nullopt when none arrived within `timeout`. Heartbeats are consumed here and Pings are
  // answered here, so a node must keep calling recv for its peer to see it alive and to measure the link. Throws
  // Error when the peer closed the connection, sent a bad frame, or was silent for dead_after. One reader at a time.
  std::optional<Message> recv(std::chrono::milliseconds timeout);

  LinkStats stats() const;
  // "worker b (127.0.0.1:5555)" once the handshake named the peer, its address before.
  const std::string& peer() const { return peer_; }
  const std::string& address() const { return address_; }
  bool encrypted() const;
  // Names the peer in messages; call before the connection is shared between threads (the handshake does).
  void set_peer_identity(Role role, std::string_view name);

  // Says Bye (best effort), stops the heartbeat thread and closes the socket after the peer closed its side (up
  // to 0.5 s). Not concurrent with send/recv.
  void close(std::string_view reason = {});

 private:
  // Writes a whole frame; returns an error text (empty on success) so the heartbeat thread can use it too.
  std::string write_frame(std::span<const uint8_t> frame, std::chrono::milliseconds stall_limit);
  [[noreturn]] void broken(const std::string& why);
  void heartbeat_loop();
  std::optional<std::pair<MsgType, std::span<const uint8_t>>> peek_frame() const;
  size_t prepare_read();

  std::unique_ptr<detail::Stream> stream_;
  std::string address_;
  std::string peer_;
  TransportOptions options_;

  std::mutex io_mutex_;    // the stream (an SSL object takes one call at a time)
  std::mutex send_mutex_;  // whole frames, so sends never interleave
  std::mutex recv_mutex_;  // one reader

  std::vector<uint8_t> tx_;        // the frame being sent (under send_mutex_), reused
  std::unique_ptr<uint8_t[]> rx_;  // receive buffer: [rx_begin_, rx_end_) received and not yet consumed
  size_t rx_capacity_ = 0;
  size_t rx_begin_ = 0;
  size_t rx_end_ = 0;
  bool tx_probe_grown_ = false;  // a Ping or Pong grew tx_ past what other messages keep (under send_mutex_)
  bool rx_probe_grown_ = false;  // the same for rx_ (reader only)
  bool peer_said_bye_ = false;
  std::string bye_reason_;

  std::atomic<bool> closed_{false};
  std::atomic<bool> write_closed_{false};  // this side sent Bye or answered one: nothing more goes out
  std::atomic<bool> failed_{false};
  std::mutex error_mutex_;
  std::string error_;  // why the connection broke, repeated by later calls

  std::atomic<int64_t> last_tx_ns_{0};  // steady clock
  std::atomic<int64_t> last_rx_ns_{0};
  std::atomic<uint64_t> bytes_sent_{0}, bytes_received_{0}, messages_sent_{0}, messages_received_{0},
      heartbeats_sent_{0}, heartbeats_received_{0};

  std::mutex hb_mutex_;
  std::condition_variable hb_cv_;
  bool hb_stop_ = false;
  std::thread heartbeat_;
};

class Listener {
 public:
  // Binds host:port (port 0 picks a free one). Without a key only a loopback address is allowed: any other
  // address is refused with an Error.
  Listener(const std::string& host_port, const ClusterKey* key, const TransportOptions& options = {});
  ~Listener();
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;

  // The next authenticated connection, or nullptr when none arrived within `timeout`. Connections that fail the
  // preamble or the TLS handshake are refused (counted, logged at most once a second, and told why when possible)
  // and waiting goes on. Every new connection's preamble is awaited at the same time (poll), so peers that say
  // nothing cost no one else any time; they are dropped after handshake_timeout, and beyond kMaxPending at once
  // the oldest is. Only a connection whose preamble has arrived goes on to the TLS handshake (up to
  // handshake_timeout: a peer that stalls there knows the protocol's magic).
  std::unique_ptr<Connection> accept(std::chrono::milliseconds timeout);
  static constexpr size_t kMaxPending = 256;

  std::string endpoint() const { return endpoint_; }  // "127.0.0.1:43125": the real port when 0 was asked
  bool encrypted() const { return tls_ != nullptr; }
  uint64_t refused() const { return refused_; }
  const std::string& last_refusal() const { return last_refusal_; }

 private:
  std::unique_ptr<detail::Socket> socket_;
  std::shared_ptr<const detail::TlsContext> tls_;
  TransportOptions options_;
  std::string endpoint_;
  uint64_t refused_ = 0;
  std::string last_refusal_;
  struct Pending;
  std::vector<Pending> pending_;  // accepted, preamble not complete yet
  std::chrono::steady_clock::time_point last_log_{};
  uint64_t unlogged_ = 0;
  void refuse(const std::string& why);
  std::unique_ptr<Connection> finish_handshake(Pending& p);
};

// Dials host:port within `timeout` (TCP connect, preamble, TLS handshake). With a key the link is TLS 1.3 with the
// cluster's PSK; without one the address must be loopback. Throws Error with the reason (refused, timed out,
// authentication failed, key missing on one side).
std::unique_ptr<Connection> connect(const std::string& host_port, const ClusterKey* key,
                                    std::chrono::milliseconds timeout, const TransportOptions& options = {});

}  // namespace tessera::net
