// Transport internals: an owned TCP socket, address parsing and resolution, waits with deadlines, and the byte
// stream interface that the plain (loopback) and TLS transports implement. Used by transport.cpp and tls.cpp.
#pragma once

#include <sys/socket.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tessera::net::detail {

using Clock = std::chrono::steady_clock;

// An owned file descriptor (closed on destruction).
class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  ~Socket() { reset(); }
  Socket(Socket&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  Socket& operator=(Socket&& other) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;

  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  void reset();

 private:
  int fd_ = -1;
};

struct Address {
  sockaddr_storage storage{};
  socklen_t length = 0;
  std::string text;  // "127.0.0.1:5555", "[::1]:5555"
  bool loopback = false;

  const sockaddr* sa() const { return reinterpret_cast<const sockaddr*>(&storage); }
};

// "host:port" or "[v6]:port" -> the addresses it names (numeric hosts are not looked up). `passive`: for bind.
std::vector<Address> resolve(const std::string& host_port, bool passive);
Address address_of(const sockaddr* sa, socklen_t length);
// The local (bound) address of a socket.
Address local_address(int fd);

void set_nonblocking(int fd);
void set_nodelay(int fd);

// Waits until fd is ready for `events` (POLLIN/POLLOUT) or the deadline passes: true when ready. A ready error
// or hang-up counts as ready so the next read or write reports it.
bool wait_fd(int fd, short events, Clock::time_point deadline);

// Seconds as people read them: "3.0 s".
std::string seconds_text(Clock::duration d);

// A non-blocking byte stream over a connected socket (plain or TLS).
enum class IoStatus { Ok, WantRead, WantWrite, Closed, Failed };

struct IoResult {
  IoStatus status = IoStatus::Ok;
  size_t n = 0;       // bytes moved when Ok (always > 0)
  std::string error;  // when Failed
};

class Stream {
 public:
  virtual ~Stream() = default;
  virtual IoResult read(void* buffer, size_t n) = 0;
  virtual IoResult write(const void* data, size_t n) = 0;
  // Tells the peer this side sends no more (TLS close_notify, TCP FIN); reading still works.
  virtual void shutdown() = 0;
  virtual bool encrypted() const = 0;
  virtual int fd() const = 0;
};

// The loopback-only transport without a key: bytes as they are.
class PlainStream : public Stream {
 public:
  explicit PlainStream(Socket socket) : socket_(std::move(socket)) {}
  IoResult read(void* buffer, size_t n) override;
  IoResult write(const void* data, size_t n) override;
  void shutdown() override;
  bool encrypted() const override { return false; }
  int fd() const override { return socket_.fd(); }

 private:
  Socket socket_;
};

// Reads or writes exactly n bytes with a deadline (the connection preamble, before any stream exists).
// Returns an error text, empty on success.
std::string read_exact(int fd, void* buffer, size_t n, Clock::time_point deadline);
std::string write_exact(int fd, const void* data, size_t n, Clock::time_point deadline);

}  // namespace tessera::net::detail
