// Host and Origin checks of browser requests (request_origin.h).
#include "server/request_origin.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

namespace tessera::server {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

bool iequals(std::string_view a, std::string_view b) { return lower(a) == lower(b); }

}  // namespace

bool is_loopback_host(std::string_view host) {
  const std::string h = lower(host);
  return h == "localhost" || h.ends_with(".localhost") || h == "::1" || h == "[::1]" || h.rfind("127.", 0) == 0;
}

std::string host_of(std::string_view host_header) {
  if (!host_header.empty() && host_header.front() == '[') {
    const auto close = host_header.find(']');
    return lower(host_header.substr(0, close == std::string_view::npos ? host_header.size() : close + 1));
  }
  const auto colon = host_header.find(':');
  return lower(host_header.substr(0, colon));
}

OriginVerdict check_origin(std::string_view listen_host, std::string_view host_header, std::string_view origin,
                           const std::vector<std::string>& allowed_origins) {
  OriginVerdict v;
  // Bound to loopback, only loopback names reach it honestly: any other Host is a name rebound to this machine.
  if (is_loopback_host(listen_host) && !host_header.empty() && !is_loopback_host(host_of(host_header))) {
    v.allowed = false;
    v.reason = fmt::format(
        "Host '{}' is not allowed: this server listens on {} (loopback) and answers only to "
        "localhost names",
        host_header, listen_host);
    return v;
  }
  if (origin.empty()) return v;  // not a browser's cross-site request
  // Same origin: the page this server itself serves.
  const auto scheme_end = origin.find("://");
  if (scheme_end != std::string_view::npos && !host_header.empty() &&
      iequals(origin.substr(scheme_end + 3), host_header)) {
    return v;
  }
  for (const std::string& a : allowed_origins) {
    if (a == "*" || iequals(a, origin)) {
      v.cross_origin = true;
      return v;
    }
  }
  v.allowed = false;
  v.reason = fmt::format(
      "Origin '{}' is not allowed: a page from another site may not use this server (allow it "
      "with --allowed-origin)",
      origin);
  return v;
}

}  // namespace tessera::server
