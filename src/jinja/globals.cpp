// The global functions templates call: Jinja2's range, namespace, dict and joiner, and transformers'
// raise_exception and strftime_now (reading the renderer's pinned or local clock).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <ctime>
#include <memory>

#include "jinja/error.h"
#include "jinja/renderer.h"

namespace tessera::jinja {

namespace {

// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's days_from_civil).
int64_t days_from_civil(int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const auto yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<int64_t>(doe) - 719468;
}

std::string format_time(const DateTime& t, const std::string& format) {
  std::tm tm{};
  tm.tm_year = t.year - 1900;
  tm.tm_mon = t.month - 1;
  tm.tm_mday = t.day;
  tm.tm_hour = t.hour;
  tm.tm_min = t.minute;
  tm.tm_sec = t.second;
  const int64_t days = days_from_civil(t.year, static_cast<unsigned>(t.month), static_cast<unsigned>(t.day));
  tm.tm_wday = static_cast<int>(((days % 7) + 11) % 7);  // 1970-01-01 was a Thursday
  tm.tm_yday = static_cast<int>(days - days_from_civil(t.year, 1, 1));
  tm.tm_isdst = -1;
  // Month and day names in the C locale whatever the process locale is, as the reference clock uses.
  static const char* const kMonths[] = {"January", "February", "March",     "April",   "May",      "June",
                                        "July",    "August",   "September", "October", "November", "December"};
  static const char* const kDays[] = {"Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"};
  std::string out;
  for (size_t i = 0; i < format.size(); ++i) {
    if (format[i] != '%' || i + 1 >= format.size()) {
      out += format[i];
      continue;
    }
    const char c = format[++i];
    switch (c) {
      case 'b':
        out += std::string(kMonths[tm.tm_mon]).substr(0, 3);
        break;
      case 'B':
        out += kMonths[tm.tm_mon];
        break;
      case 'a':
        out += std::string(kDays[tm.tm_wday]).substr(0, 3);
        break;
      case 'A':
        out += kDays[tm.tm_wday];
        break;
      case 'p':
        out += tm.tm_hour < 12 ? "AM" : "PM";
        break;
      case '-': {  // glibc's %-d, %-m: no padding
        if (i + 1 >= format.size()) break;
        const char d = format[++i];
        const int value = d == 'd'   ? t.day
                          : d == 'm' ? t.month
                          : d == 'H' ? t.hour
                          : d == 'M' ? t.minute
                          : d == 'S' ? t.second
                          : d == 'I' ? (t.hour % 12 == 0 ? 12 : t.hour % 12)
                                     : -1;
        out += value >= 0 ? std::to_string(value) : std::string("%-") + d;
        break;
      }
      default: {
        char buf[64];
        const char spec[3] = {'%', c, '\0'};
        const size_t n = std::strftime(buf, sizeof buf, spec, &tm);
        out.append(buf, n);
      }
    }
  }
  return out;
}

}  // namespace

Value make_globals_value(const std::string& name, Renderer& r) {
  if (name == "range")
    return Value::function("range", [&r](CallArgs& a) {
      int64_t start = 0, stop = 0, step = 1;
      const auto& p = a.positional;
      if (p.size() == 1) {
        stop = p[0].as_int();
      } else if (p.size() >= 2) {
        start = p[0].as_int();
        stop = p[1].as_int();
        if (p.size() >= 3) step = p[2].as_int();
      } else {
        type_error("range expected at least 1 argument, got 0");
      }
      if (step == 0) throw JinjaError(ErrorKind::Type, "range() arg 3 must not be zero");
      // The loops over a range count its iterations; the range itself is bounded by the same limit.
      const double span = static_cast<double>(stop) - static_cast<double>(start);
      const double size = std::max(0.0, std::ceil(span / static_cast<double>(step)));
      if (size > static_cast<double>(r.limits().max_loop_iterations))
        throw JinjaError(ErrorKind::Limit, fmt::format("range of {} items exceeds the loop limit", size));
      ValueList out;
      out.reserve(static_cast<size_t>(size));
      for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) out.push_back(Value::integer(i));
      return Value::list(std::move(out));
    });
  if (name == "namespace" || name == "dict")
    return Value::function(name, [name, &r](CallArgs& a) {
      Dict d;
      for (const auto& p : a.positional) {
        if (p.is_mapping()) {
          for (const auto& [k, v] : p.dict().items) d.set(k, v);
        } else {
          for (const auto& pair : iterate(p)) {
            const ValueList kv = iterate(pair);
            if (kv.size() != 2 || !kv[0].is_string()) type_error(name + "() needs key/value pairs");
            d.set(kv[0].str(), kv[1]);
          }
        }
      }
      for (const auto& [k, v] : a.keyword) d.set(k, v);
      if (name != "namespace") return Value::object(std::move(d));
      Value ns = Value::ns(std::move(d));
      r.track_namespace(ns);
      return ns;
    });
  if (name == "raise_exception")
    return Value::function("raise_exception", [](CallArgs& a) -> Value {
      throw JinjaError(ErrorKind::Template, a.positional.empty() ? std::string() : a.positional[0].to_str());
    });
  if (name == "strftime_now")
    return Value::function("strftime_now", [&r](CallArgs& a) {
      if (a.positional.empty() || !a.positional[0].is_string()) type_error("strftime_now() needs a format string");
      return Value::string(format_time(r.now(), a.positional[0].str()));
    });
  if (name == "joiner")
    return Value::function("joiner", [](CallArgs& a) {
      const std::string sep = a.positional.empty() ? ", " : a.positional[0].to_str();
      auto used = std::make_shared<bool>(false);
      return Value::function("joiner", [sep, used](CallArgs&) {
        if (!*used) {
          *used = true;
          return Value::string("");
        }
        return Value::string(sep);
      });
    });
  return Value::undefined("'" + name + "' is undefined");
}

}  // namespace tessera::jinja
