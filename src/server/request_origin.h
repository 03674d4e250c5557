// Which browsers' requests the server accepts: a page on another site must not drive a key-less server on loopback
// (cross-site POSTs need no preflight when their body is "text/plain"), and a DNS name rebound to 127.0.0.1 must not
// make a remote page same-origin with it. Pure functions over the Host and Origin headers.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tessera::server {

// "localhost", "127.x.y.z", "::1", "[::1]" (without a port).
bool is_loopback_host(std::string_view host);

// The host of a Host header ("name:port", "[v6]:port", "name"), lower-cased, without the port.
std::string host_of(std::string_view host_header);

struct OriginVerdict {
  bool allowed = true;
  bool cross_origin = false;  // allowed by the list: the answer carries Access-Control-Allow-Origin
  std::string reason;         // why not, for the 403's message
};

// listen_host: the address the server is bound to; host_header and origin: the request's (empty when absent);
// allowed_origins: the --allowed-origin list ("*" allows every origin).
OriginVerdict check_origin(std::string_view listen_host, std::string_view host_header, std::string_view origin,
                           const std::vector<std::string>& allowed_origins);

}  // namespace tessera::server
