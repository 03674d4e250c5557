// TCP sockets for the transport: address parsing and resolution, non-blocking I/O with deadlines.
#include "net/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "util/error.h"

namespace tessera::net::detail {

Socket& Socket::operator=(Socket&& other) noexcept {
  if (this != &other) {
    reset();
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

void Socket::reset() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

Address address_of(const sockaddr* sa, socklen_t length) {
  Address a;
  std::memcpy(&a.storage, sa, std::min<size_t>(length, sizeof a.storage));
  a.length = length;
  char host[INET6_ADDRSTRLEN] = "?";
  if (sa->sa_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(sa);
    inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
    a.text = fmt::format("{}:{}", host, ntohs(in->sin_port));
    a.loopback = (ntohl(in->sin_addr.s_addr) >> 24) == 127;
  } else if (sa->sa_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(sa);
    inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
    a.text = fmt::format("[{}]:{}", host, ntohs(in6->sin6_port));
    a.loopback = IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr) != 0;
    // ::ffff:127.x.y.z is loopback too.
    if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) a.loopback = in6->sin6_addr.s6_addr[12] == 127;
  } else {
    a.text = "(unknown address family)";
  }
  return a;
}

std::vector<Address> resolve(const std::string& host_port, bool passive) {
  std::string host;
  std::string port;
  if (!host_port.empty() && host_port[0] == '[') {
    const auto close = host_port.find(']');
    if (close == std::string::npos || close + 1 >= host_port.size() || host_port[close + 1] != ':') {
      fail("'{}' is not an address: expected [IPv6]:PORT", host_port);
    }
    host = host_port.substr(1, close - 1);
    port = host_port.substr(close + 2);
  } else {
    const auto colon = host_port.rfind(':');
    if (colon == std::string::npos) fail("'{}' is not an address: expected HOST:PORT", host_port);
    host = host_port.substr(0, colon);
    port = host_port.substr(colon + 1);
    if (host.find(':') != std::string::npos) fail("'{}': write an IPv6 address as [ADDRESS]:PORT", host_port);
  }
  if (host.empty()) fail("'{}' has no host: expected HOST:PORT (e.g. 127.0.0.1:{})", host_port, port);
  if (port.empty() || port.size() > 5 ||
      !std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; }) || std::stoi(port) > 65535) {
    fail("'{}' has no valid port (0 to 65535)", host_port);
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
  addrinfo* list = nullptr;
  const int rc = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &list);
  if (rc != 0) fail("cannot resolve '{}': {}", host, gai_strerror(rc));
  std::vector<Address> out;
  for (const addrinfo* ai = list; ai != nullptr; ai = ai->ai_next) {
    if (ai->ai_family == AF_INET || ai->ai_family == AF_INET6) out.push_back(address_of(ai->ai_addr, ai->ai_addrlen));
  }
  ::freeaddrinfo(list);
  if (out.empty()) fail("'{}' resolves to no IPv4 or IPv6 address", host);
  return out;
}

Address local_address(int fd) {
  sockaddr_storage storage{};
  socklen_t length = sizeof storage;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&storage), &length) != 0) {
    fail("getsockname failed: {}", std::strerror(errno));
  }
  return address_of(reinterpret_cast<const sockaddr*>(&storage), length);
}

void set_nonblocking(int fd) {
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) fail("fcntl failed: {}", std::strerror(errno));
}

void set_nodelay(int fd) {
  // Requests and replies are small and latency-bound: do not let Nagle hold them back.
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

bool wait_fd(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    const auto now = Clock::now();
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - now).count();
    pollfd p{fd, events, 0};
    const int rc = ::poll(&p, 1, static_cast<int>(std::clamp<int64_t>(left, 0, 1 << 30)));
    if (rc > 0) return true;
    if (rc == 0) {
      if (Clock::now() >= deadline) return false;
      continue;
    }
    if (errno != EINTR) fail("poll failed: {}", std::strerror(errno));
  }
}

std::string seconds_text(Clock::duration d) {
  return fmt::format("{:.1f} s", std::chrono::duration<double>(d).count());
}

IoResult PlainStream::read(void* buffer, size_t n) {
  for (;;) {
    const ssize_t got = ::recv(socket_.fd(), buffer, n, 0);
    if (got > 0) return {IoStatus::Ok, static_cast<size_t>(got), {}};
    if (got == 0) return {IoStatus::Closed, 0, {}};
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return {IoStatus::WantRead, 0, {}};
    return {IoStatus::Failed, 0, std::strerror(errno)};
  }
}

IoResult PlainStream::write(const void* data, size_t n) {
  for (;;) {
    // MSG_NOSIGNAL: a vanished peer must surface as an error, not kill the process with SIGPIPE.
    const ssize_t put = ::send(socket_.fd(), data, n, MSG_NOSIGNAL);
    if (put > 0) return {IoStatus::Ok, static_cast<size_t>(put), {}};
    if (put < 0 && errno == EINTR) continue;
    if (put < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return {IoStatus::WantWrite, 0, {}};
    return {IoStatus::Failed, 0, put == 0 ? "send wrote nothing" : std::strerror(errno)};
  }
}

void PlainStream::shutdown() { ::shutdown(socket_.fd(), SHUT_WR); }

std::string read_exact(int fd, void* buffer, size_t n, Clock::time_point deadline) {
  auto* p = static_cast<uint8_t*>(buffer);
  size_t done = 0;
  while (done < n) {
    const ssize_t got = ::recv(fd, p + done, n - done, 0);
    if (got > 0) {
      done += static_cast<size_t>(got);
      continue;
    }
    if (got == 0) return "the connection was closed";
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return std::strerror(errno);
    if (!wait_fd(fd, POLLIN, deadline)) return "timed out";
  }
  return {};
}

std::string write_exact(int fd, const void* data, size_t n, Clock::time_point deadline) {
  const auto* p = static_cast<const uint8_t*>(data);
  size_t done = 0;
  while (done < n) {
    const ssize_t put = ::send(fd, p + done, n - done, MSG_NOSIGNAL);
    if (put > 0) {
      done += static_cast<size_t>(put);
      continue;
    }
    if (put < 0 && errno == EINTR) continue;
    if (put < 0 && errno != EAGAIN && errno != EWOULDBLOCK) return std::strerror(errno);
    if (!wait_fd(fd, POLLOUT, deadline)) return "timed out";
  }
  return {};
}

}  // namespace tessera::net::detail
