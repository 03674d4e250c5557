// SSE framing: writing events and splitting a received stream back into them.
#include "server/sse.h"

namespace tessera::server {

std::string sse_event(std::string_view payload) {
  std::string out;
  out.reserve(payload.size() + 8);
  out += "data: ";
  out += payload;
  out += "\n\n";
  return out;
}

std::vector<std::string> SseParser::push(std::string_view bytes) {
  buffer_ += bytes;
  std::vector<std::string> events;
  size_t start = 0;
  for (size_t nl = buffer_.find('\n', start); nl != std::string::npos; nl = buffer_.find('\n', start)) {
    std::string_view line(buffer_.data() + start, nl - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    start = nl + 1;
    if (line.empty()) {
      if (data_) events.push_back(std::move(*data_));
      data_.reset();
    } else if (line.front() == ':') {
      continue;
    } else if (line.starts_with("data:")) {
      line.remove_prefix(5);
      if (!line.empty() && line.front() == ' ') line.remove_prefix(1);
      if (data_) {
        *data_ += '\n';
        *data_ += line;
      } else {
        data_ = std::string(line);
      }
    } else {
      ++bad_lines_;
    }
  }
  buffer_.erase(0, start);
  return events;
}

}  // namespace tessera::server
