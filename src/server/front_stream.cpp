// FrontStream: poll() against the deadline before every recv/send on a non-blocking socket.
#include "server/front_stream.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace tessera::server {

namespace {

// Waits for `events` until the deadline; true when ready.
bool wait_for(int fd, short events, FrontStream::Clock::time_point deadline) {
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - FrontStream::Clock::now());
    if (left.count() < 0) return false;
    pollfd p{fd, events, 0};
    const int r = poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count() + 1, 1 << 30)));
    if (r > 0) return true;  // readable, writable, or an error/hang-up the next call reports
    if (r < 0 && errno != EINTR) return false;
  }
}

void address_of(const sockaddr_storage& a, std::string& ip, int& port) {
  char text[INET6_ADDRSTRLEN] = {};
  if (a.ss_family == AF_INET) {
    const auto& v4 = reinterpret_cast<const sockaddr_in&>(a);
    inet_ntop(AF_INET, &v4.sin_addr, text, sizeof text);
    port = ntohs(v4.sin_port);
  } else if (a.ss_family == AF_INET6) {
    const auto& v6 = reinterpret_cast<const sockaddr_in6&>(a);
    inet_ntop(AF_INET6, &v6.sin6_addr, text, sizeof text);
    port = ntohs(v6.sin6_port);
  }
  ip = text;
}

}  // namespace

FrontStream::FrontStream(int fd, std::string buffered, Clock::time_point read_deadline,
                         std::chrono::milliseconds write_time)
    : fd_(fd), buffered_(std::move(buffered)), read_deadline_(read_deadline), write_time_(write_time) {}

bool FrontStream::is_readable() const { return pos_ < buffered_.size() || wait_for(fd_, POLLIN, read_deadline_); }

bool FrontStream::is_writable() const {
  // A peer that hung up is not writable: streaming handlers stop generating for it.
  pollfd p{fd_, POLLOUT, 0};
  if (poll(&p, 1, 0) > 0 && (p.revents & (POLLERR | POLLHUP))) return false;
  return wait_for(fd_, POLLOUT, Clock::now() + write_time_);
}

ssize_t FrontStream::read(char* ptr, size_t size) {
  if (pos_ < buffered_.size()) {
    const size_t n = std::min(size, buffered_.size() - pos_);
    std::memcpy(ptr, buffered_.data() + pos_, n);
    pos_ += n;
    return static_cast<ssize_t>(n);
  }
  while (true) {
    if (!wait_for(fd_, POLLIN, read_deadline_)) {
      read_timed_out_ = true;
      return -1;
    }
    const ssize_t n = recv(fd_, ptr, size, 0);
    if (n >= 0) return n;
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return -1;
  }
}

ssize_t FrontStream::write(const char* ptr, size_t size) {
  size_t done = 0;
  const Clock::time_point deadline = Clock::now() + write_time_;
  while (done < size) {
    if (!wait_for(fd_, POLLOUT, deadline)) return done > 0 ? static_cast<ssize_t>(done) : -1;
    const ssize_t n = send(fd_, ptr + done, size - done, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) continue;
      return done > 0 ? static_cast<ssize_t>(done) : -1;
    }
    done += static_cast<size_t>(n);
    wrote_ = true;
  }
  return static_cast<ssize_t>(done);
}

void FrontStream::get_remote_ip_and_port(std::string& ip, int& port) const {
  sockaddr_storage a{};
  socklen_t n = sizeof a;
  port = 0;
  if (getpeername(fd_, reinterpret_cast<sockaddr*>(&a), &n) == 0) address_of(a, ip, port);
}

void FrontStream::get_local_ip_and_port(std::string& ip, int& port) const {
  sockaddr_storage a{};
  socklen_t n = sizeof a;
  port = 0;
  if (getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &n) == 0) address_of(a, ip, port);
}

std::string FrontStream::take_unread() {
  std::string rest = buffered_.substr(pos_);
  buffered_.clear();
  pos_ = 0;
  return rest;
}

}  // namespace tessera::server
