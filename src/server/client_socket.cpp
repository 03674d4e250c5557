// ClientSocket: /proc/self/fd lists the descriptors; the one whose local and peer ports are the request's is its
// connection. recv(MSG_PEEK) tells EOF (peer gone) from no data (still there) without consuming anything.
#include "server/client_socket.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <charconv>
#include <filesystem>
#include <string>

namespace tessera::server {

namespace {

int port_of(const sockaddr_storage& a) {
  if (a.ss_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in&>(a).sin_port);
  if (a.ss_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6&>(a).sin6_port);
  return -1;
}

}  // namespace

ClientSocket::ClientSocket(const httplib::Request& req) {
  if (req.local_port <= 0 || req.remote_port <= 0) return;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd", ec)) {
    const std::string name = entry.path().filename().string();
    int fd = -1;
    if (std::from_chars(name.data(), name.data() + name.size(), fd).ec != std::errc()) continue;
    sockaddr_storage local{};
    sockaddr_storage peer{};
    socklen_t n = sizeof local;
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &n) != 0) continue;
    if (port_of(local) != req.local_port) continue;
    n = sizeof peer;
    if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &n) != 0) continue;
    if (port_of(peer) != req.remote_port) continue;
    fd_ = fd;
    return;
  }
}

bool ClientSocket::closed() const {
  if (fd_ < 0) return false;
  char c = 0;
  const ssize_t n = recv(fd_, &c, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n == 0) return true;
  if (n > 0) return false;  // a pipelined next request: still connected
  return errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
}

}  // namespace tessera::server
