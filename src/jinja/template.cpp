// Template: parse once, render many times; the clock helpers strftime_now reads.
#include "jinja/template.h"

#include <ctime>

#include "jinja/error.h"
#include "jinja/parser.h"
#include "jinja/renderer.h"

namespace tessera::jinja {

struct Template::Parsed {
  Body body;
};

Template::Template(std::string_view source) {
  auto parsed = std::make_shared<Parsed>();
  parsed->body = Parser(tokenize(source)).parse_template();
  parsed_ = std::move(parsed);
}

Template::~Template() = default;
Template::Template(Template&&) noexcept = default;
Template& Template::operator=(Template&&) noexcept = default;

std::string Template::render(const nlohmann::ordered_json& context, const RenderOptions& options) const {
  Renderer renderer(options);
  return renderer.render(parsed_->body, context);
}

DateTime parse_iso8601(std::string_view text) {
  DateTime t;
  int n = 0;
  const std::string s(text);
  const int fields = std::sscanf(s.c_str(), "%4d-%2d-%2d%n", &t.year, &t.month, &t.day, &n);
  if (fields != 3) fail("--now: '{}' is not an ISO-8601 date (YYYY-MM-DD[THH:MM[:SS]])", text);
  size_t pos = static_cast<size_t>(n);
  if (pos < s.size() && (s[pos] == 'T' || s[pos] == ' ')) {
    int m = 0;
    if (std::sscanf(s.c_str() + pos + 1, "%2d:%2d%n", &t.hour, &t.minute, &m) != 2)
      fail("--now: '{}' has no HH:MM after the date", text);
    pos += 1 + static_cast<size_t>(m);
    if (pos < s.size() && s[pos] == ':') {
      if (std::sscanf(s.c_str() + pos + 1, "%2d%n", &t.second, &m) != 1) fail("--now: '{}' has bad seconds", text);
      pos += 1 + static_cast<size_t>(m);
    }
  }
  if (pos != s.size()) fail("--now: unexpected '{}' in '{}'", s.substr(pos), text);
  if (t.month < 1 || t.month > 12 || t.day < 1 || t.day > 31 || t.hour > 23 || t.minute > 59 || t.second > 60)
    fail("--now: '{}' is out of range", text);
  return t;
}

DateTime local_now() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  return {tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec};
}

}  // namespace tessera::jinja
