// Jinja errors: formatting the user-facing text with the template location.
#include "jinja/error.h"

#include <fmt/format.h>

namespace tessera::jinja {

namespace {

std::string describe(ErrorKind kind, const std::string& message, int line, int column) {
  const char* what = "";
  switch (kind) {
    case ErrorKind::Syntax:
      what = "syntax error";
      break;
    case ErrorKind::Template:
      what = "raised";
      break;
    case ErrorKind::Type:
      what = "type error";
      break;
    case ErrorKind::Undefined:
      what = "undefined";
      break;
    case ErrorKind::Security:
      what = "not allowed";
      break;
    case ErrorKind::Limit:
      what = "limit exceeded";
      break;
  }
  if (line <= 0) return fmt::format("chat template ({}): {}", what, message);
  if (column <= 0) return fmt::format("chat template line {} ({}): {}", line, what, message);
  return fmt::format("chat template line {}, column {} ({}): {}", line, column, what, message);
}

}  // namespace

JinjaError::JinjaError(ErrorKind kind, std::string message, int line, int column)
    : Error(describe(kind, message, line, column)),
      kind_(kind),
      message_(std::move(message)),
      line_(line),
      column_(column) {}

JinjaError JinjaError::located(int line, int column) const {
  if (line_ > 0) return *this;
  return JinjaError(kind_, message_, line, column);
}

void type_error(const std::string& message) { throw JinjaError(ErrorKind::Type, message); }
void undefined_error(const std::string& message) {
  // The sandbox's refusals are undefined values too (as in Jinja2): using one is a security error.
  if (message.starts_with(kUnsafeMarker)) throw JinjaError(ErrorKind::Security, message.substr(kUnsafeMarker.size()));
  throw JinjaError(ErrorKind::Undefined, message);
}

}  // namespace tessera::jinja
