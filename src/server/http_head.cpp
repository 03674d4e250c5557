// scan_head: line by line over the bytes so far; only the fields the front needs (length of the body) are read,
// httplib parses the rest once the request is complete.
#include "server/http_head.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

namespace tessera::server {

namespace {

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

HeadScan failed(HeadScan::State state, std::string reason) {
  HeadScan scan;
  scan.state = state;
  scan.reason = std::move(reason);
  return scan;
}

bool parse_request_line(std::string_view line, HeadScan& scan) {
  const size_t sp1 = line.find(' ');
  if (sp1 == std::string_view::npos || sp1 == 0) return false;
  const size_t sp2 = line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || sp2 == sp1 + 1) return false;
  const std::string_view method = line.substr(0, sp1);
  const std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  const std::string_view version = line.substr(sp2 + 1);
  if (!std::all_of(method.begin(), method.end(), [](char c) { return c >= 'A' && c <= 'Z'; })) return false;
  if (version.rfind("HTTP/1.", 0) != 0 || version.size() != 8) return false;
  scan.method = std::string(method);
  scan.path = std::string(target.substr(0, target.find('?')));
  return true;
}

// Content-Length: digits only; a second, different value is a smuggling attempt.
bool read_length(std::string_view value, HeadScan& scan) {
  if (value.empty() || value.size() > 18) return false;
  size_t n = 0;
  for (char c : value) {
    if (c < '0' || c > '9') return false;
    n = n * 10 + static_cast<size_t>(c - '0');
  }
  if (scan.content_length && *scan.content_length != n) return false;
  scan.content_length = n;
  return true;
}

}  // namespace

HeadScan scan_head(std::string_view bytes, const HttpLimits& limits) {
  HeadScan scan;
  size_t pos = 0;
  size_t fields = 0;
  bool first = true;
  while (true) {
    const size_t nl = bytes.find('\n', pos);
    if (nl == std::string_view::npos) {
      if (first && bytes.size() - pos > limits.request_line_bytes)
        return failed(HeadScan::State::UriTooLong,
                      fmt::format("the request line is longer than {} bytes", limits.request_line_bytes));
      if (bytes.size() > limits.head_bytes)
        return failed(HeadScan::State::TooLarge,
                      fmt::format("the request head is larger than {} bytes", limits.head_bytes));
      return scan;
    }
    std::string_view line = bytes.substr(pos, nl - pos);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (nl + 1 > limits.head_bytes)
      return failed(HeadScan::State::TooLarge,
                    fmt::format("the request head is larger than {} bytes", limits.head_bytes));
    if (first) {
      if (nl - pos > limits.request_line_bytes)
        return failed(HeadScan::State::UriTooLong,
                      fmt::format("the request line is longer than {} bytes", limits.request_line_bytes));
      if (!parse_request_line(line, scan))
        return failed(HeadScan::State::Malformed, "the request line is not 'METHOD target HTTP/1.x'");
      first = false;
    } else if (line.empty()) {
      scan.state = HeadScan::State::Complete;
      scan.head_end = nl + 1;
      return scan;
    } else {
      if (++fields > limits.header_lines)
        return failed(HeadScan::State::TooLarge,
                      fmt::format("the request has more than {} header fields", limits.header_lines));
      // A field starting with white space would be an obsolete folded line: refused, as RFC 9112 allows.
      if (line.front() == ' ' || line.front() == '\t')
        return failed(HeadScan::State::Malformed, fmt::format("header line {} starts with white space", fields));
      const size_t colon = line.find(':');
      if (colon == std::string_view::npos || colon == 0)
        return failed(HeadScan::State::Malformed, fmt::format("header line {} has no 'name:'", fields));
      const std::string_view name = line.substr(0, colon);
      const std::string_view value = trim(line.substr(colon + 1));
      if (iequals(name, "Content-Length") && !read_length(value, scan))
        return failed(HeadScan::State::Malformed, "the Content-Length is not one decimal number");
      if (iequals(name, "Transfer-Encoding")) {
        std::string lower(value);
        std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
        if (lower.find("chunked") != std::string::npos) scan.chunked = true;
      }
    }
    pos = nl + 1;
  }
}

std::string simple_response(int status, std::string_view json_body, int retry_after_seconds) {
  std::string_view text = "Error";
  switch (status) {
    case 400:
      text = "Bad Request";
      break;
    case 408:
      text = "Request Timeout";
      break;
    case 414:
      text = "URI Too Long";
      break;
    case 431:
      text = "Request Header Fields Too Large";
      break;
    case 503:
      text = "Service Unavailable";
      break;
    default:
      break;
  }
  std::string out = fmt::format("HTTP/1.1 {} {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n", status,
                                text, json_body.size());
  if (retry_after_seconds > 0) out += fmt::format("Retry-After: {}\r\n", retry_after_seconds);
  out += "Connection: close\r\n\r\n";
  out += json_body;
  return out;
}

}  // namespace tessera::server
