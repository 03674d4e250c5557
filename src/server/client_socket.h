// Whether the client of a request is still connected. cpp-httplib 0.11 (Debian 12) gives a handler no way to ask,
// so this finds the request's socket by its two port numbers and peeks at it: a closed connection reads EOF.
#pragma once

#include <httplib.h>

namespace tessera::server {

class ClientSocket {
 public:
  // Looks the socket up once (a scan of this process's descriptors); the handler keeps it open while it runs.
  explicit ClientSocket(const httplib::Request& req);
  // True when the peer closed or reset the connection. Never true when the socket was not found.
  bool closed() const;

 private:
  int fd_ = -1;
};

}  // namespace tessera::server
