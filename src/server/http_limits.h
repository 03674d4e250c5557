// Bounds of the HTTP front: how long a request may take to arrive, how large its head may be, how many
// connections wait and how many complete requests queue for a handler thread.
#pragma once

#include <chrono>
#include <cstddef>

namespace tessera::server {

struct HttpLimits {
  // A request's head and body must arrive within this time of its first byte (of the accept for the first
  // request of a connection): a client that trickles a byte a second cannot hold a thread (408).
  std::chrono::milliseconds request_time{10000};
  std::chrono::milliseconds keep_alive_idle{5000};  // an idle kept-alive connection is closed after this
  std::chrono::milliseconds write_time{10000};      // a client that reads nothing for this long is dropped
  size_t head_bytes = 32 * 1024;                    // request line + headers (431 above)
  size_t header_lines = 100;                        // header fields (431 above)
  size_t request_line_bytes = 8192;                 // request line (414 above)
  size_t body_bytes = 1 << 20;                      // bodies up to this are read before a thread is taken
  size_t waiting_connections = 1024;                // connections whose next request has not fully arrived
  size_t queued_requests = 64;                      // complete requests waiting for a handler thread (503 above)
  size_t keep_alive_requests = 100;                 // requests on one connection before it is closed
};

}  // namespace tessera::server
