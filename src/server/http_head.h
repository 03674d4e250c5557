// Scans the bytes of an HTTP/1.x request as they arrive: where its head ends, how long its body is, and whether
// it breaks a bound. Pure (no sockets), so the front's accept loop stays small and the scanner can be fuzzed.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "server/http_limits.h"

namespace tessera::server {

struct HeadScan {
  enum class State {
    Incomplete,  // the head has not ended yet and breaks no bound
    Complete,    // head_end is the index just past the blank line
    TooLarge,    // 431: the head or its field count exceeds the bound
    UriTooLong,  // 414: the request line exceeds its bound
    Malformed,   // 400: not an HTTP/1.x request line, or a bad Content-Length
  };
  State state = State::Incomplete;
  size_t head_end = 0;
  std::string method;
  std::string path;  // the request target without its query
  std::optional<size_t> content_length;
  bool chunked = false;  // Transfer-Encoding: chunked (the body's length is not known from the head)
  std::string reason;    // for the error answer
};

// bytes: everything received for this request so far (it may also hold the start of its body or of a next
// request).
HeadScan scan_head(std::string_view bytes, const HttpLimits& limits);

// A complete minimal response: status line, JSON content, Connection: close.
std::string simple_response(int status, std::string_view json_body, int retry_after_seconds = 0);

}  // namespace tessera::server
