// A parsed Jinja template rendered with Python Jinja2's semantics as Hugging Face's apply_chat_template
// configures it (sandboxed, trim_blocks and lstrip_blocks, transformers' tojson/raise_exception/strftime_now).
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace tessera::jinja {

struct Stmt;

// A naive local date and time, as Python's datetime.now() gives strftime_now.
struct DateTime {
  int year = 1970, month = 1, day = 1, hour = 0, minute = 0, second = 0;
};
// Parses "YYYY-MM-DD[THH:MM[:SS]]"; throws Error otherwise.
DateTime parse_iso8601(std::string_view text);
DateTime local_now();

// The sandbox bounds: a template that exceeds one fails with an ErrorKind::Limit error.
struct RenderLimits {
  int64_t max_loop_iterations = 1'000'000;  // all loops of one render together
  int max_call_depth = 64;                  // nested macro / caller() calls
  size_t max_output_bytes = 32u << 20;      // rendered text, including captured set blocks and macro results
};

struct RenderOptions {
  std::optional<DateTime> now;  // the clock strftime_now reads; the local time when unset
  RenderLimits limits;
};

class Template {
 public:
  // Parses the template; throws JinjaError (ErrorKind::Syntax) naming the line and column.
  explicit Template(std::string_view source);
  ~Template();
  Template(Template&&) noexcept;
  Template& operator=(Template&&) noexcept;

  // Renders with the context's top-level keys as variables; throws JinjaError on a template error.
  std::string render(const nlohmann::ordered_json& context, const RenderOptions& options = {}) const;

 private:
  struct Parsed;
  std::shared_ptr<const Parsed> parsed_;
};

}  // namespace tessera::jinja
