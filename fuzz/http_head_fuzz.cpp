// libFuzzer target for the HTTP front's head scanner: any bytes from a client must scan to a state without
// crashing, and a complete head must end inside the input and name a body length the scanner read from it.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "server/http_head.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tessera::server;
  HttpLimits limits;
  limits.head_bytes = 2048;
  limits.header_lines = 16;
  limits.request_line_bytes = 256;
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  const HeadScan scan = scan_head(bytes, limits);
  if (scan.state == HeadScan::State::Complete) {
    if (scan.head_end == 0 || scan.head_end > size || scan.head_end > limits.head_bytes) __builtin_trap();
    if (scan.method.empty() || bytes.substr(0, scan.method.size()) != scan.method) __builtin_trap();
    // Scanning again with the bytes cut at the head's end gives the same answer.
    const HeadScan again = scan_head(bytes.substr(0, scan.head_end), limits);
    if (again.state != HeadScan::State::Complete || again.head_end != scan.head_end ||
        again.content_length != scan.content_length)
      __builtin_trap();
  }
  (void)simple_response(400, scan.reason, 1);
  return 0;
}
