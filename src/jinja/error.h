// Jinja errors: the Python exception class they correspond to, the message, and the template line/column.
#pragma once

#include <string>
#include <string_view>

#include "util/error.h"

namespace tessera::jinja {

enum class ErrorKind {
  Syntax,     // TemplateSyntaxError: the template does not parse
  Template,   // TemplateError: raised by the template's own raise_exception(msg)
  Type,       // TypeError: an operation on the wrong kinds of values
  Undefined,  // UndefinedError: use of an undefined value
  Security,   // SecurityError: the sandbox refused an operation
  Limit,      // a sandbox bound (loop iterations, recursion, output size) was exceeded
};

class JinjaError : public Error {
 public:
  JinjaError(ErrorKind kind, std::string message, int line = 0, int column = 0);
  ErrorKind kind() const { return kind_; }
  const std::string& message() const { return message_; }  // without the location
  int line() const { return line_; }
  int column() const { return column_; }
  // Returns a copy that names this location, unless a location is already known.
  JinjaError located(int line, int column) const;

 private:
  ErrorKind kind_;
  std::string message_;
  int line_;
  int column_;
};

// Starts the hint of an Undefined that stands for an attribute the sandbox refuses.
inline constexpr std::string_view kUnsafeMarker = "\x03unsafe:";

[[noreturn]] void type_error(const std::string& message);
[[noreturn]] void undefined_error(const std::string& message);

}  // namespace tessera::jinja
