// Jinja2's built-in filters that chat templates use, plus transformers' tojson (json.dumps with
// ensure_ascii=False). map/select/reject/selectattr/rejectattr return generators, as in Python.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <utility>

#include "jinja/error.h"
#include "jinja/renderer.h"

namespace tessera::jinja {

namespace {

const Value* opt(const CallArgs& a, std::string_view name, size_t index) {
  const Value* v = a.get(name, index);
  return v && !v->is_undefined() ? v : nullptr;
}

// Jinja2's make_attrgetter: "a.b.0" looks up item-then-attribute at each dotted step.
Value attribute_of(const Value& item, const std::string& path) {
  Value v = item;
  size_t start = 0;
  while (start <= path.size()) {
    const size_t dot = path.find('.', start);
    const std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    const bool numeric = !part.empty() && std::all_of(part.begin(), part.end(), ::isdigit);
    v = get_item(v, numeric ? Value::integer(std::stoll(part)) : Value::string(part));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return v;
}

Value sort_key(const Value& v, bool case_sensitive) {
  if (!case_sensitive && v.is_string()) {
    std::string s = v.str();
    for (char& c : s)
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    return Value::string(s);
  }
  return v;
}

std::vector<std::string> split_lines(const std::string& s) {
  std::vector<std::string> lines;
  size_t start = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '\n' || c == '\r' || c == '\v' || c == '\f' || c == '\x1c' || c == '\x1d' || c == '\x1e') {
      lines.push_back(s.substr(start, i - start));
      if (c == '\r' && i + 1 < s.size() && s[i + 1] == '\n') ++i;
      start = i + 1;
    }
  }
  if (start < s.size()) lines.push_back(s.substr(start));
  return lines;
}

Value select_or_reject(Renderer& r, const Value& seq, CallArgs& args, bool select, bool by_attr) {
  if (!seq.truthy()) return Value::list({}, Kind::Generator);  // Jinja2 checks `if seq:` first (None passes)
  size_t next = 0;
  std::string attr;
  if (by_attr) {
    if (args.positional.empty()) type_error("selectattr/rejectattr need an attribute name");
    attr = args.positional[next++].to_str();
  }
  std::string test;
  CallArgs test_args;
  if (next < args.positional.size()) {
    test = args.positional[next++].to_str();
    test_args.positional.assign(args.positional.begin() + static_cast<std::ptrdiff_t>(next), args.positional.end());
    test_args.keyword = args.keyword;
  }
  ValueList out;
  for (const auto& item : iterate(seq)) {
    r.count_iteration();
    const Value subject = by_attr ? attribute_of(item, attr) : item;
    const bool ok = test.empty() ? subject.truthy() : r.apply_test(test, subject, test_args);
    if (ok == select) out.push_back(item);
  }
  return Value::list(std::move(out), Kind::Generator);
}

Value map_filter(Renderer& r, const Value& seq, CallArgs& args) {
  ValueList out;
  if (!seq.truthy()) return Value::list({}, Kind::Generator);
  if (const Value* attr = args.get("attribute", static_cast<size_t>(-1))) {
    const Value* def = args.get("default", static_cast<size_t>(-1));
    for (const auto& item : iterate(seq)) {
      r.count_iteration();
      Value v = attribute_of(item, attr->to_str());
      out.push_back(v.is_undefined() && def ? *def : v);
    }
    return Value::list(std::move(out), Kind::Generator);
  }
  if (args.positional.empty()) type_error("map() needs a filter name or attribute=");
  const std::string filter = args.positional[0].to_str();
  CallArgs rest;
  rest.positional.assign(args.positional.begin() + 1, args.positional.end());
  rest.keyword = args.keyword;
  for (const auto& item : iterate(seq)) {
    r.count_iteration();
    CallArgs a = rest;
    out.push_back(r.apply_filter(filter, item, a));
  }
  return Value::list(std::move(out), Kind::Generator);
}

Value tojson(const Value& v, const CallArgs& args) {
  const Value* ensure_ascii = opt(args, "ensure_ascii", 0);
  const Value* indent_v = opt(args, "indent", 1);
  const Value* separators = opt(args, "separators", 2);
  const Value* sort_keys = opt(args, "sort_keys", 3);
  int indent = -1;
  if (indent_v && !indent_v->is_none()) indent = static_cast<int>(std::clamp<int64_t>(indent_v->as_int(), 0, 64));
  std::string item_sep = indent >= 0 ? "," : ", ";
  std::string key_sep = ": ";
  if (separators && !separators->is_none()) {
    const ValueList parts = iterate(*separators);
    if (parts.size() != 2) type_error("separators must be a pair");
    item_sep = parts[0].to_str();
    key_sep = parts[1].to_str();
  }
  return Value::string(
      to_json(v, ensure_ascii && ensure_ascii->truthy(), indent, item_sep, key_sep, sort_keys && sort_keys->truthy()));
}

Value to_int(const Value& v, const CallArgs& args) {
  const Value* def = opt(args, "default", 0);
  const Value fallback = def ? *def : Value::integer(0);
  if (v.is_number()) return Value::integer(v.as_int());
  if (v.is_string()) {
    std::string s = strip_chars(v.str(), nullptr, true, true);
    s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
    try {
      size_t used = 0;
      const long long n = std::stoll(s, &used, 10);
      if (used == s.size()) return Value::integer(n);
      const double d = std::stod(s, &used);
      if (used == s.size()) return Value::integer(static_cast<int64_t>(d));
    } catch (const std::exception&) {
    }
  }
  return fallback;
}

Value min_max(const Value& v, const CallArgs& args, bool want_max) {
  const Value* cs = opt(args, "case_sensitive", 0);
  const Value* attr = opt(args, "attribute", 1);
  const ValueList items = iterate(v);
  if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  size_t best = 0;
  for (size_t i = 1; i < items.size(); ++i) {
    const Value a = sort_key(attr ? attribute_of(items[i], attr->to_str()) : items[i], cs && cs->truthy());
    const Value b = sort_key(attr ? attribute_of(items[best], attr->to_str()) : items[best], cs && cs->truthy());
    if (want_max ? value_less(b, a) : value_less(a, b)) best = i;
  }
  return items[best];
}

}  // namespace

Value Renderer::apply_filter(const std::string& name, const Value& v, CallArgs& args) {
  if (name == "tojson") return tojson(v, args);
  if (name == "length" || name == "count") {
    if (v.is(Kind::Generator)) type_error("object of type 'generator' has no len()");
    return Value::integer(static_cast<int64_t>(length(v)));
  }
  if (name == "trim") return Value::string(strip_chars(v.to_str(), opt(args, "chars", 0), true, true), v.is_markup());
  if (name == "string") return v.is_string() ? v : Value::string(v.to_str());
  if (name == "default" || name == "d") {
    const Value* def = args.get("default_value", 0);
    const Value* boolean = opt(args, "boolean", 1);
    const bool use_default = v.is_undefined() || (boolean && boolean->truthy() && !v.truthy());
    return use_default ? (def ? *def : Value::string("")) : v;
  }
  if (name == "join") {
    const Value* sep = opt(args, "d", 0);
    const Value* attr = opt(args, "attribute", 1);
    std::string out;
    bool first = true;
    for (const auto& item : iterate(v)) {
      if (!first && sep) out += sep->to_str();
      first = false;
      out += (attr ? attribute_of(item, attr->to_str()) : item).to_str();
    }
    return Value::string(std::move(out));
  }
  if (name == "items") {
    if (v.is_undefined()) return Value::list({});
    if (!v.is_mapping()) type_error("items filter needs a mapping, got " + v.type_name());
    ValueList out;
    for (const auto& [k, x] : v.dict().items) out.push_back(Value::list({key_value(k), x}, Kind::Tuple));
    return Value::list(std::move(out));
  }
  if (name == "list") return Value::list(iterate(v));
  if (name == "safe") return Value::string(v.to_str(), true);
  if (name == "escape" || name == "e") return v.is_markup() ? v : Value::string(html_escape(v.to_str()), true);
  if (name == "selectattr" || name == "rejectattr") return select_or_reject(*this, v, args, name == "selectattr", true);
  if (name == "select" || name == "reject") return select_or_reject(*this, v, args, name == "select", false);
  if (name == "map") return map_filter(*this, v, args);
  if (name == "dictsort") {
    if (!v.is_mapping()) type_error("dictsort filter needs a mapping, got " + v.type_name());
    const Value* cs = opt(args, "case_sensitive", 0);
    const Value* by = opt(args, "by", 1);
    const Value* reverse = opt(args, "reverse", 2);
    const bool by_value = by && by->to_str() == "value";
    std::vector<std::pair<std::string, Value>> entries = v.dict().items;
    std::stable_sort(entries.begin(), entries.end(), [&](const auto& a, const auto& b) {
      const Value ka = sort_key(by_value ? a.second : key_value(a.first), cs && cs->truthy());
      const Value kb = sort_key(by_value ? b.second : key_value(b.first), cs && cs->truthy());
      return value_less(ka, kb);
    });
    if (reverse && reverse->truthy()) std::reverse(entries.begin(), entries.end());
    ValueList out;
    for (auto& [k, x] : entries) out.push_back(Value::list({key_value(k), x}, Kind::Tuple));
    return Value::list(std::move(out));
  }
  if (name == "sort") {
    const Value* reverse = opt(args, "reverse", 0);
    const Value* cs = opt(args, "case_sensitive", 1);
    const Value* attr = opt(args, "attribute", 2);
    ValueList items = iterate(v);
    std::stable_sort(items.begin(), items.end(), [&](const Value& a, const Value& b) {
      return value_less(sort_key(attr ? attribute_of(a, attr->to_str()) : a, cs && cs->truthy()),
                        sort_key(attr ? attribute_of(b, attr->to_str()) : b, cs && cs->truthy()));
    });
    if (reverse && reverse->truthy()) std::reverse(items.begin(), items.end());
    return Value::list(std::move(items));
  }
  if (name == "unique") {
    const Value* cs = opt(args, "case_sensitive", 0);
    const Value* attr = opt(args, "attribute", 1);
    ValueList out, seen;
    for (const auto& item : iterate(v)) {
      const Value key = sort_key(attr ? attribute_of(item, attr->to_str()) : item, cs && cs->truthy());
      if (std::any_of(seen.begin(), seen.end(), [&](const Value& s) { return values_equal(s, key); })) continue;
      seen.push_back(key);
      out.push_back(item);
    }
    return Value::list(std::move(out), Kind::Generator);
  }
  if (name == "min" || name == "max") return min_max(v, args, name == "max");
  if (name == "lower" || name == "upper" || name == "title" || name == "capitalize") {
    CallArgs none;
    return call(get_attr(Value::string(v.to_str()), name), none);
  }
  if (name == "replace") {
    CallArgs a = args;
    return call(get_attr(Value::string(v.to_str()), "replace"), a);
  }
  if (name == "indent") {
    const Value* width_v = opt(args, "width", 0);
    const Value* first = opt(args, "first", 1);
    const Value* blank = opt(args, "blank", 2);
    const std::string indention = width_v && width_v->is_string()
                                      ? width_v->str()
                                      : std::string(static_cast<size_t>(width_v ? width_v->as_int() : 4), ' ');
    const std::vector<std::string> lines = split_lines(v.to_str() + "\n");
    std::string rv;
    if (blank && blank->truthy()) {
      for (size_t i = 0; i < lines.size(); ++i) rv += (i ? "\n" + indention : "") + lines[i];
    } else {
      rv = lines.empty() ? "" : lines[0];
      for (size_t i = 1; i < lines.size(); ++i) rv += "\n" + (lines[i].empty() ? "" : indention + lines[i]);
    }
    if (first && first->truthy()) rv = indention + rv;
    return Value::string(std::move(rv));
  }
  if (name == "int") return to_int(v, args);
  if (name == "float") {
    if (v.is_number()) return Value::number(v.as_double());
    try {
      return Value::number(std::stod(v.to_str()));
    } catch (const std::exception&) {
      const Value* def = opt(args, "default", 0);
      return def ? *def : Value::number(0);
    }
  }
  if (name == "abs") {
    if (!v.is_number()) type_error("bad operand type for abs(): '" + v.type_name() + "'");
    return v.is(Kind::Float) ? Value::number(std::fabs(v.as_double())) : Value::integer(std::llabs(v.as_int()));
  }
  if (name == "round") {
    const Value* precision = opt(args, "precision", 0);
    const double scale = std::pow(10.0, precision ? static_cast<double>(precision->as_int()) : 0.0);
    // Python's round() takes halves to even; nearbyint does too in the default rounding mode.
    return Value::number(std::nearbyint(v.as_double() * scale) / scale);
  }
  if (name == "batch") {
    const Value* count = opt(args, "linecount", 0);
    const Value* fill = opt(args, "fill_with", 1);
    const int64_t n = count ? count->as_int() : 0;
    if (n <= 0) throw JinjaError(ErrorKind::Type, "batch size must be positive");
    ValueList out, current;
    for (const auto& item : iterate(v)) {
      current.push_back(item);
      if (static_cast<int64_t>(current.size()) == n) out.push_back(Value::list(std::exchange(current, {})));
    }
    if (!current.empty()) {
      while (fill && static_cast<int64_t>(current.size()) < n) current.push_back(*fill);
      out.push_back(Value::list(std::move(current)));
    }
    return Value::list(std::move(out), Kind::Generator);
  }
  if (name == "first" || name == "last") {
    const ValueList items = iterate(v);
    if (items.empty()) return Value::undefined("sequence was empty");
    return name == "first" ? items.front() : items.back();
  }
  if (name == "reverse") {
    if (v.is_string()) {
      std::u32string u = utf8_decode(v.str());
      std::reverse(u.begin(), u.end());
      return Value::string(utf8_encode(u));
    }
    ValueList items = iterate(v);
    std::reverse(items.begin(), items.end());
    return Value::list(std::move(items), Kind::Generator);
  }
  if (name == "sum") {
    const Value* attr = opt(args, "attribute", 0);
    const Value* start = opt(args, "start", 1);
    Value total = start ? *start : Value::integer(0);
    for (const auto& item : iterate(v)) {
      const Value x = attr ? attribute_of(item, attr->to_str()) : item;
      if (!x.is_number() || !total.is_number()) type_error("sum() needs numbers");
      total = total.is(Kind::Float) || x.is(Kind::Float) ? Value::number(total.as_double() + x.as_double())
                                                         : Value::integer(total.as_int() + x.as_int());
    }
    return total;
  }
  if (name == "attr") {
    const Value* attr = opt(args, "name", 0);
    return attr ? get_attr(v, attr->to_str()) : Value::undefined();
  }
  if (name == "format") return percent_format(v.to_str(), args.positional);
  if (name == "wordcount") {
    CallArgs none;
    return Value::integer(
        static_cast<int64_t>(iterate(call(get_attr(Value::string(v.to_str()), "split"), none)).size()));
  }
  throw JinjaError(ErrorKind::Type, "No filter named '" + name + "'.");
}

}  // namespace tessera::jinja
