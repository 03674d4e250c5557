// Connections, the listener and connect(): the connection preamble, framing over a plain or TLS stream,
// heartbeats and dead-peer detection, per-type size limits enforced before any allocation.
#include "net/transport.h"

#include <fmt/format.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "net/socket.h"
#include "net/tls.h"
#include "util/error.h"
#include "util/log.h"

namespace tessera::net {

using detail::Clock;

namespace {

// Sent in the clear by both sides before anything else, so each can say plainly why they cannot talk (no key on
// one side, not a Tessera node) instead of failing inside TLS. Neither side trusts it: each enforces its own mode.
constexpr uint8_t kPreambleMagic[4] = {'T', 'S', 'R', 'A'};
constexpr uint8_t kPreambleVersion = 1;
constexpr uint8_t kModePlain = 0;
constexpr uint8_t kModeTls = 1;
constexpr size_t kPreambleBytes = 8;

std::array<uint8_t, kPreambleBytes> make_preamble(bool tls) {
  return {kPreambleMagic[0],
          kPreambleMagic[1],
          kPreambleMagic[2],
          kPreambleMagic[3],
          kPreambleVersion,
          tls ? kModeTls : kModePlain,
          0,
          0};
}

// Why the peer's preamble does not match ours, or empty. `peer_is_server` words the message for the dialler.
std::string preamble_mismatch(const std::array<uint8_t, kPreambleBytes>& p, bool tls, bool peer_is_server) {
  if (std::memcmp(p.data(), kPreambleMagic, 4) != 0) return "it is not a Tessera node (unexpected first bytes)";
  if (p[4] != kPreambleVersion || p[6] != 0 || p[7] != 0) {
    return fmt::format("it speaks transport preamble version {}, this node {}", p[4], kPreambleVersion);
  }
  if (p[5] != kModePlain && p[5] != kModeTls) return fmt::format("it asked for unknown transport mode {}", p[5]);
  const bool peer_tls = p[5] == kModeTls;
  if (peer_tls == tls) return {};
  if (peer_is_server) {
    return tls ? "it runs without a cluster key (loopback only) but this node has one: give both nodes the same "
                 "key file, or neither"
               : "it requires a cluster key: pass the cluster's key file (tessera keygen makes one)";
  }
  return tls ? "it has no cluster key but this listener requires one"
             : "it uses a cluster key but this listener runs without one (loopback only)";
}

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}

Clock::time_point from_ns(int64_t ns) { return Clock::time_point(std::chrono::nanoseconds(ns)); }

constexpr size_t kReadChunk = 256u << 10;
constexpr size_t kKeepBuffer = 64u << 20;
// A link measurement's Pings and Pongs carry megabytes once, at connect: buffers they grew past this are released
// with the first other message after them (not between them: that would time fresh pages, not the link), or each
// link would hold them (both ends, both directions) for its whole life.
constexpr size_t kProbeKeep = 4 * kReadChunk;
bool is_probe(MsgType t) { return t == MsgType::Ping || t == MsgType::Pong; }
constexpr std::chrono::milliseconds kLingerTime{500};

}  // namespace

// ---- Connection ----

Connection::Connection(std::unique_ptr<detail::Stream> stream, std::string address, const TransportOptions& options)
    : stream_(std::move(stream)), address_(std::move(address)), peer_(address_), options_(options) {
  last_tx_ns_ = now_ns();
  last_rx_ns_ = now_ns();
  if (options_.heartbeat_interval.count() > 0) heartbeat_ = std::thread([this] { heartbeat_loop(); });
}

Connection::~Connection() { close(); }

bool Connection::encrypted() const { return stream_ && stream_->encrypted(); }

void Connection::set_peer_identity(Role role, std::string_view name) {
  // "worker b (10.0.0.2:50061)"; a head that calls itself "head" is just "head (address)", not "head head".
  peer_ = name == role_name(role) ? fmt::format("{} ({})", name, address_)
                                  : fmt::format("{} {} ({})", role_name(role), name, address_);
}

LinkStats Connection::stats() const {
  return {bytes_sent_.load(),        bytes_received_.load(),  messages_sent_.load(),
          messages_received_.load(), heartbeats_sent_.load(), heartbeats_received_.load()};
}

void Connection::broken(const std::string& why) {
  {
    std::lock_guard lock(error_mutex_);
    if (error_.empty()) error_ = why;
  }
  failed_ = true;
  fail("{}", why);
}

std::string Connection::write_frame(std::span<const uint8_t> frame, std::chrono::milliseconds stall_limit) {
  size_t done = 0;
  auto stall_deadline = Clock::now() + stall_limit;
  while (done < frame.size()) {
    detail::IoResult r;
    {
      std::lock_guard lock(io_mutex_);
      r = stream_->write(frame.data() + done, frame.size() - done);
    }
    switch (r.status) {
      case detail::IoStatus::Ok:
        done += r.n;
        bytes_sent_ += r.n;
        stall_deadline = Clock::now() + stall_limit;
        break;
      case detail::IoStatus::WantWrite:
        if (!detail::wait_fd(stream_->fd(), POLLOUT, stall_deadline)) {
          return fmt::format("send stalled for {} (the peer is not reading)", detail::seconds_text(stall_limit));
        }
        break;
      case detail::IoStatus::WantRead:
        // TLS may need to read before it can write; the reader thread (or this wait) makes progress.
        detail::wait_fd(stream_->fd(), POLLIN, std::min(stall_deadline, Clock::now() + std::chrono::milliseconds(10)));
        if (Clock::now() >= stall_deadline) {
          return fmt::format("send stalled for {}", detail::seconds_text(stall_limit));
        }
        break;
      case detail::IoStatus::Closed:
        return "connection closed by the peer";
      case detail::IoStatus::Failed:
        return fmt::format("connection lost ({})", r.error);
    }
  }
  last_tx_ns_ = now_ns();
  return {};
}

void Connection::send(const Message& message) {
  if (closed_) fail("{}: the connection is closed", peer_);
  if (write_closed_) {
    fail("{}: the connection is closing (Bye was sent or received)", peer_);
  }
  if (failed_) {
    std::lock_guard lock(error_mutex_);
    fail("{}", error_);
  }
  const MsgType type = type_of(message);
  std::string error;
  {
    std::lock_guard lock(send_mutex_);
    try {
      encode_frame(message, tx_);  // validates every field and the type's size limit
    } catch (const Error& e) {
      // Nothing was sent: the message itself is bad, which is this node's fault, not the peer's.
      fail("cannot send to {}: {}", peer_, e.what());
    }
    error = write_frame(tx_, options_.send_stall);
    if (is_probe(type)) {
      tx_probe_grown_ = tx_probe_grown_ || tx_.capacity() > kProbeKeep;
    } else if (tx_probe_grown_) {
      tx_probe_grown_ = false;
      if (tx_.capacity() > kProbeKeep) tx_ = std::vector<uint8_t>();
    }
    if (tx_.capacity() > kKeepBuffer) tx_ = std::vector<uint8_t>();
  }
  if (!error.empty()) broken(fmt::format("{}: sending {}: {}", peer_, msg_type_name(type), error));
  ++messages_sent_;
}

// The next complete frame in rx_, if any. Its header (type, flags, size limit) is validated as soon as its 8 bytes
// are in, so an oversized frame is refused before its body is read or room is made for it.
std::optional<std::pair<MsgType, std::span<const uint8_t>>> Connection::peek_frame() const {
  const size_t have = rx_end_ - rx_begin_;
  if (have < kFrameHeaderBytes) return std::nullopt;
  const FrameHeader h =
      parse_frame_header(std::span<const uint8_t, kFrameHeaderBytes>(rx_.get() + rx_begin_, kFrameHeaderBytes));
  if (have < kFrameHeaderBytes + h.body_bytes) return std::nullopt;
  return std::make_pair(h.type, std::span<const uint8_t>(rx_.get() + rx_begin_ + kFrameHeaderBytes, h.body_bytes));
}

// Moves unconsumed bytes to the front and makes room for the rest of the current frame (or a read chunk). Frames up
// to kKeepBuffer reuse one buffer (fresh pages cost more than the copy); a larger frame gets its own, which goes
// once that frame is consumed.
size_t Connection::prepare_read() {
  const size_t have = rx_end_ - rx_begin_;
  size_t want = have + kReadChunk;
  if (have >= kFrameHeaderBytes) {
    const FrameHeader h =
        parse_frame_header(std::span<const uint8_t, kFrameHeaderBytes>(rx_.get() + rx_begin_, kFrameHeaderBytes));
    want = std::max(want, kFrameHeaderBytes + h.body_bytes);
  }
  if (want > rx_capacity_ || (rx_capacity_ > kKeepBuffer && want <= kKeepBuffer)) {
    const size_t capacity = std::max(want, 4 * kReadChunk);
    auto fresh = std::make_unique_for_overwrite<uint8_t[]>(capacity);
    if (have > 0) std::memcpy(fresh.get(), rx_.get() + rx_begin_, have);
    rx_ = std::move(fresh);
    rx_capacity_ = capacity;
  } else if (rx_begin_ > 0 && have > 0) {
    std::memmove(rx_.get(), rx_.get() + rx_begin_, have);
  }
  rx_begin_ = 0;
  rx_end_ = have;
  return rx_capacity_ - rx_end_;
}

std::optional<Message> Connection::recv(std::chrono::milliseconds timeout) {
  std::lock_guard reader(recv_mutex_);
  if (closed_) fail("{}: the connection is closed", peer_);
  if (failed_) {
    std::lock_guard lock(error_mutex_);
    fail("{}", error_);
  }
  const auto wait_start = Clock::now();
  const auto deadline = wait_start + timeout;
  bool tried_read = false;
  for (;;) {
    std::optional<Message> message;
    MsgType type{};
    try {
      if (auto frame = peek_frame()) {
        type = frame->first;
        message = decode_body(type, frame->second);
        rx_begin_ += kFrameHeaderBytes + frame->second.size();
      }
    } catch (const Error& e) {
      broken(fmt::format("{}: {}", peer_, e.what()));
    }
    if (message) {
      if (is_probe(type)) {
        rx_probe_grown_ = rx_probe_grown_ || rx_capacity_ > kProbeKeep;
      } else if (rx_probe_grown_ && rx_begin_ == rx_end_) {
        rx_probe_grown_ = false;
        if (rx_capacity_ > kProbeKeep) {
          rx_.reset();
          rx_capacity_ = rx_begin_ = rx_end_ = 0;
        }
      }
      if (type == MsgType::Heartbeat) {
        ++heartbeats_received_;
        continue;
      }
      ++messages_received_;
      if (type == MsgType::Ping) {
        const auto& ping = std::get<Ping>(*message);
        send(Pong{ping.id, std::vector<uint8_t>(ping.reply_bytes, uint8_t{0x5a})});
        continue;
      }
      if (type == MsgType::Bye) {
        peer_said_bye_ = true;
        bye_reason_ = std::get<Bye>(*message).reason;
        // The peer is closing and waits for our side to close as well (see close()).
        std::lock_guard send_lock(send_mutex_);
        std::lock_guard io(io_mutex_);
        if (!write_closed_) stream_->shutdown();
        write_closed_ = true;
      }
      return message;
    }
    // A frame still arriving when the time is up stays buffered for the next call.
    if (tried_read && Clock::now() >= deadline) return std::nullopt;
    tried_read = true;

    const size_t room = prepare_read();
    detail::IoResult r;
    {
      std::lock_guard lock(io_mutex_);
      r = stream_->read(rx_.get() + rx_end_, room);
    }
    switch (r.status) {
      case detail::IoStatus::Ok:
        rx_end_ += r.n;
        bytes_received_ += r.n;
        last_rx_ns_ = now_ns();
        continue;
      case detail::IoStatus::Closed:
        if (peer_said_bye_) {
          broken(
              fmt::format("{}: closed the connection{}", peer_, bye_reason_.empty() ? "" : " (" + bye_reason_ + ")"));
        }
        broken(fmt::format("{}: connection closed by the peer", peer_));
      case detail::IoStatus::Failed:
        broken(fmt::format("{}: connection lost ({})", peer_, r.error));
      case detail::IoStatus::WantRead:
      case detail::IoStatus::WantWrite:
        break;
    }
    const auto now = Clock::now();
    const auto silent_since = std::max(from_ns(last_rx_ns_.load()), wait_start);
    const auto dead_at = silent_since + options_.dead_after;
    if (now >= dead_at) {
      broken(fmt::format("{}: no heartbeat for {}", peer_, detail::seconds_text(now - silent_since)));
    }
    if (now >= deadline) return std::nullopt;
    detail::wait_fd(stream_->fd(), r.status == detail::IoStatus::WantWrite ? POLLOUT : POLLIN,
                    std::min(deadline, dead_at));
  }
}

void Connection::heartbeat_loop() {
  std::vector<uint8_t> frame(kFrameHeaderBytes);
  write_frame_header(MsgType::Heartbeat, 0, frame.data());
  std::unique_lock lock(hb_mutex_);
  while (!hb_stop_ && !write_closed_) {
    const auto next = from_ns(last_tx_ns_.load()) + options_.heartbeat_interval;
    if (Clock::now() < next) {
      hb_cv_.wait_until(lock, next, [this] { return hb_stop_; });
      continue;
    }
    lock.unlock();
    bool sent = false;
    std::string error;
    // A send in progress already shows the peer this side is alive.
    if (send_mutex_.try_lock()) {
      error = write_frame(frame, options_.dead_after);
      send_mutex_.unlock();
      sent = error.empty();
    } else {
      last_tx_ns_ = now_ns();
    }
    lock.lock();
    if (sent) ++heartbeats_sent_;
    // The owner's next send or recv reports the failure with the peer's name.
    if (!error.empty()) return;
  }
}

void Connection::close(std::string_view reason) {
  if (closed_.exchange(true)) return;
  {
    std::lock_guard lock(hb_mutex_);
    hb_stop_ = true;
  }
  hb_cv_.notify_all();
  if (heartbeat_.joinable()) heartbeat_.join();
  if (!stream_) return;
  if (!failed_ && !write_closed_) {
    try {
      std::vector<uint8_t> frame = encode_frame(Bye{wire_text(reason, kMaxReason)});
      std::lock_guard lock(send_mutex_);
      if (write_frame(frame, std::chrono::milliseconds(1000)).empty()) {
        std::lock_guard io(io_mutex_);
        stream_->shutdown();
        write_closed_ = true;
      }
    } catch (const Error&) {
      // Closing anyway: a peer that cannot take a Bye learns from the closed socket.
    }
  }
  if (write_closed_ && !failed_) {
    // Closing a socket with unread bytes makes the kernel send RST, and an RST can make the peer drop what it
    // has not read yet, our Bye included. So read until the peer closes too (it does on Bye), briefly.
    const auto deadline = Clock::now() + kLingerTime;
    std::vector<uint8_t> sink(kReadChunk);
    for (;;) {
      const detail::IoResult r = stream_->read(sink.data(), sink.size());
      if (r.status == detail::IoStatus::Ok) continue;
      if (r.status != detail::IoStatus::WantRead && r.status != detail::IoStatus::WantWrite) break;
      if (!detail::wait_fd(stream_->fd(), POLLIN, deadline)) break;
    }
  }
  stream_.reset();
}

// ---- Listener ----

// A connection accepted and waiting for its preamble.
struct Listener::Pending {
  detail::Socket socket;
  detail::Address peer;
  Clock::time_point deadline;
  std::array<uint8_t, kPreambleBytes> preamble{};
  size_t got = 0;
};

Listener::Listener(const std::string& host_port, const ClusterKey* key, const TransportOptions& options)
    : socket_(std::make_unique<detail::Socket>()), options_(options) {
  const auto addresses = detail::resolve(host_port, true);
  const detail::Address& address = addresses.front();
  if (key == nullptr && !address.loopback) {
    fail(
        "refusing to listen on {} without a cluster key: anyone who can reach it could drive this node. Give it "
        "a key file (tessera keygen) or listen on 127.0.0.1",
        host_port);
  }
  if (key != nullptr) tls_ = std::make_shared<const detail::TlsContext>(*key, true);
  detail::Socket s(::socket(address.storage.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!s.valid()) fail("cannot create a socket: {}", std::strerror(errno));
  const int one = 1;
  ::setsockopt(s.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(s.fd(), address.sa(), address.length) != 0) {
    fail("cannot listen on {}: {}", host_port, std::strerror(errno));
  }
  if (::listen(s.fd(), SOMAXCONN) != 0) fail("cannot listen on {}: {}", host_port, std::strerror(errno));
  detail::set_nonblocking(s.fd());
  endpoint_ = detail::local_address(s.fd()).text;
  *socket_ = std::move(s);
}

Listener::~Listener() = default;

// Refusals are counted and remembered; the log gets at most one line a second (a flood of bad peers must not
// flood it), with the number left out since.
void Listener::refuse(const std::string& why) {
  ++refused_;
  last_refusal_ = why;
  const auto now = Clock::now();
  if (now - last_log_ < std::chrono::seconds(1)) {
    ++unlogged_;
    return;
  }
  if (unlogged_ > 0) {
    log_warn("{}: refused a connection: {} (and {} more since the last report)", endpoint_, why, unlogged_);
  } else {
    log_warn("{}: refused a connection: {}", endpoint_, why);
  }
  last_log_ = now;
  unlogged_ = 0;
}

// The preamble has arrived: answer it and, with a key, run the TLS handshake.
std::unique_ptr<Connection> Listener::finish_handshake(Pending& p) {
  const auto handshake_deadline = Clock::now() + options_.handshake_timeout;
  try {
    const auto ours = make_preamble(tls_ != nullptr);
    // Answer even a mismatch, so the dialler can say why it cannot connect.
    detail::write_exact(p.socket.fd(), ours.data(), ours.size(), handshake_deadline);
    const std::string mismatch = preamble_mismatch(p.preamble, tls_ != nullptr, false);
    if (!mismatch.empty()) fail("{}: {}", p.peer.text, mismatch);
    std::unique_ptr<detail::Stream> stream;
    if (tls_) {
      stream = detail::tls_handshake(tls_, std::move(p.socket), p.peer.text, handshake_deadline);
    } else {
      stream = std::make_unique<detail::PlainStream>(std::move(p.socket));
    }
    return std::make_unique<Connection>(std::move(stream), p.peer.text, options_);
  } catch (const Error& e) {
    refuse(e.what());
  }
  return nullptr;
}

std::unique_ptr<Connection> Listener::accept(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    // Every connection waiting: take them all, so a flood of silent peers cannot hide the one that speaks.
    for (;;) {
      sockaddr_storage storage{};
      socklen_t length = sizeof storage;
      detail::Socket s(
          ::accept4(socket_->fd(), reinterpret_cast<sockaddr*>(&storage), &length, SOCK_NONBLOCK | SOCK_CLOEXEC));
      if (!s.valid()) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ECONNABORTED) break;
        if (errno == EMFILE || errno == ENFILE) {
          // Out of descriptors: the oldest waiting peer makes room.
          if (!pending_.empty()) {
            refuse(fmt::format("{}: dropped to make room (out of file descriptors)", pending_.front().peer.text));
            pending_.erase(pending_.begin());
            continue;
          }
          break;
        }
        fail("accept on {} failed: {}", endpoint_, std::strerror(errno));
      }
      if (pending_.size() >= kMaxPending) {
        refuse(fmt::format("{}: no preamble (dropped: {} connections were waiting for theirs)",
                           pending_.front().peer.text, kMaxPending));
        pending_.erase(pending_.begin());
      }
      Pending p;
      p.peer = detail::address_of(reinterpret_cast<const sockaddr*>(&storage), length);
      detail::set_nodelay(s.fd());
      p.socket = std::move(s);
      p.deadline = Clock::now() + options_.handshake_timeout;
      pending_.push_back(std::move(p));
    }
    // Read what has arrived of each preamble; finish the first complete one, drop the failed and the late.
    const auto now = Clock::now();
    for (size_t i = 0; i < pending_.size();) {
      Pending& p = pending_[i];
      std::string error;
      const ssize_t n = ::recv(p.socket.fd(), p.preamble.data() + p.got, kPreambleBytes - p.got, MSG_DONTWAIT);
      if (n > 0) {
        p.got += static_cast<size_t>(n);
      } else if (n == 0) {
        error = "closed before its preamble";
      } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        error = std::strerror(errno);
      }
      if (error.empty() && p.got < kPreambleBytes && now >= p.deadline) {
        error = "timed out after " + detail::seconds_text(options_.handshake_timeout);
      }
      if (!error.empty()) {
        refuse(fmt::format("{}: no preamble ({})", p.peer.text, error));
        pending_.erase(pending_.begin() + static_cast<ptrdiff_t>(i));
        continue;
      }
      if (p.got == kPreambleBytes) {
        Pending ready = std::move(p);
        pending_.erase(pending_.begin() + static_cast<ptrdiff_t>(i));
        if (auto conn = finish_handshake(ready)) return conn;
        continue;
      }
      ++i;
    }
    if (Clock::now() >= deadline) return nullptr;
    // Wait for a new connection, a preamble's bytes, or the earliest deadline.
    std::vector<pollfd> fds;
    fds.push_back({socket_->fd(), POLLIN, 0});
    auto wake = deadline;
    for (const Pending& p : pending_) {
      fds.push_back({p.socket.fd(), POLLIN, 0});
      wake = std::min(wake, p.deadline);
    }
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(wake - Clock::now()).count();
    ::poll(fds.data(), fds.size(), static_cast<int>(std::clamp<int64_t>(ms + 1, 0, 1000)));
  }
}

// ---- connect ----

std::unique_ptr<Connection> connect(const std::string& host_port, const ClusterKey* key,
                                    std::chrono::milliseconds timeout, const TransportOptions& options) {
  const auto deadline = Clock::now() + timeout;
  const auto addresses = detail::resolve(host_port, false);
  std::string last_error;
  for (const detail::Address& address : addresses) {
    if (key == nullptr && !address.loopback) {
      fail("refusing to connect to {} without a cluster key: only loopback links may go unencrypted", host_port);
    }
    detail::Socket s(::socket(address.storage.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!s.valid()) fail("cannot create a socket: {}", std::strerror(errno));
    if (::connect(s.fd(), address.sa(), address.length) != 0) {
      if (errno != EINPROGRESS) {
        last_error = fmt::format("cannot connect to {}: {}", address.text, std::strerror(errno));
        continue;
      }
      if (!detail::wait_fd(s.fd(), POLLOUT, deadline)) {
        last_error = fmt::format("cannot connect to {}: timed out after {}", address.text,
                                 detail::seconds_text(std::chrono::duration_cast<Clock::duration>(timeout)));
        continue;
      }
      int err = 0;
      socklen_t len = sizeof err;
      ::getsockopt(s.fd(), SOL_SOCKET, SO_ERROR, &err, &len);
      if (err != 0) {
        last_error = fmt::format("cannot connect to {}: {}{}", address.text, std::strerror(err),
                                 err == ECONNREFUSED ? " (is a Tessera worker listening there?)" : "");
        continue;
      }
    }
    detail::set_nodelay(s.fd());
    const auto ours = make_preamble(key != nullptr);
    std::string io_error = detail::write_exact(s.fd(), ours.data(), ours.size(), deadline);
    std::array<uint8_t, kPreambleBytes> theirs{};
    if (io_error.empty()) io_error = detail::read_exact(s.fd(), theirs.data(), theirs.size(), deadline);
    if (!io_error.empty()) fail("cannot connect to {}: {} during the handshake", address.text, io_error);
    const std::string mismatch = preamble_mismatch(theirs, key != nullptr, true);
    if (!mismatch.empty()) fail("cannot connect to {}: {}", address.text, mismatch);
    std::unique_ptr<detail::Stream> stream;
    if (key != nullptr) {
      auto context = std::make_shared<const detail::TlsContext>(*key, false);
      stream = detail::tls_handshake(std::move(context), std::move(s), address.text, deadline);
    } else {
      stream = std::make_unique<detail::PlainStream>(std::move(s));
    }
    return std::make_unique<Connection>(std::move(stream), address.text, options);
  }
  fail("{}", last_error);
}

}  // namespace tessera::net
