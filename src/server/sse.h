// Server-sent events as OpenAI streams them: each event one `data: <json>` line and a blank line, the stream
// closed by `data: [DONE]`. The parser (for tests and tools) checks that framing strictly.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tessera::server {

inline constexpr std::string_view kSseDone = "data: [DONE]\n\n";

// One event carrying `payload`, which must not contain a newline (compact JSON never does).
std::string sse_event(std::string_view payload);

// Splits a byte stream into the data of its events. Bytes may arrive in any pieces.
class SseParser {
 public:
  // Adds bytes; returns the data of every event completed by them. Comment lines are skipped.
  std::vector<std::string> push(std::string_view bytes);
  // Lines other than `data: ...`, comments and blank ones (a framing error when non-zero).
  int bad_lines() const { return bad_lines_; }
  // Bytes after the last complete event.
  const std::string& pending() const { return buffer_; }

 private:
  std::string buffer_;
  std::optional<std::string> data_;
  int bad_lines_ = 0;
};

}  // namespace tessera::server
