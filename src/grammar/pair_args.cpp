// Pair arguments: each property a copy of the pair pattern with its key written in and its value's grammar; text
// values end where the reader ends them (at the first piece of the literal after the value), so their grammar is
// free text that cannot hold that piece; the pairs follow the schema's order, optional ones maybe.
#include "grammar/pair_args.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>

#include "grammar/free_text.h"
#include "grammar/parser.h"
#include "util/error.h"

namespace tessera::grammar {

namespace {

using Json = nlohmann::ordered_json;

// A literal in grammar text, nothing for an empty one.
std::string optional_literal(std::string_view s) { return s.empty() ? std::string() : quote_literal(s); }

bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
bool is_punct(char c) { return c == '{' || c == '}' || c == '[' || c == ']' || c == ',' || c == ':'; }

// What the reader (chat/derived_reader.cpp) ends a slot at: the literal after it, past its leading whitespace, up
// to whitespace or JSON punctuation (a lone punctuation byte when it starts so). `lead`: the whitespace before.
struct Terminator {
  std::string lead, stop, rest;  // lead + stop + rest == the literal
};
Terminator terminator(std::string_view lit) {
  size_t a = 0;
  while (a < lit.size() && is_ws(lit[a])) ++a;
  size_t n = a;
  if (n < lit.size() && is_punct(lit[n])) {
    ++n;
  } else {
    while (n < lit.size() && !is_ws(lit[n]) && !is_punct(lit[n])) ++n;
  }
  return {std::string(lit.substr(0, a)), std::string(lit.substr(a, n - a)), std::string(lit.substr(n))};
}

// The bytes a key may hold (the reader's name characters).
bool key_char_ok(char c) {
  return !is_ws(c) && c != '<' && c != '>' && c != '"' && c != '\'' && c != '{' && c != '}' && c != '[' && c != ']' &&
         c != '`' && c != ',' && static_cast<unsigned char>(c) >= 0x20;
}

bool text_schema(const Json& s) {
  if (!s.is_object()) return false;
  for (const auto& [k, v] : s.items()) {
    if (k != "type" && k != "enum" && k != "const" && k != "minLength" && k != "maxLength" && k != "description" &&
        k != "title" && k != "default" && k != "examples" && k != "format" && k != "$comment")
      return false;
  }
  if (s.contains("const")) return s["const"].is_string();
  if (s.contains("enum")) {
    if (!s["enum"].is_array() || s["enum"].empty()) return false;
    for (const auto& v : s["enum"]) {
      if (!v.is_string()) return false;
    }
    return true;
  }
  return s.contains("type") && s["type"] == "string";
}

// Keys as Jinja's dictsort orders them (ignoring case).
void sort_keys(std::vector<std::string>& keys) {
  auto lower = [](std::string k) {
    for (char& c : k) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return k;
  };
  std::stable_sort(keys.begin(), keys.end(),
                   [&](const std::string& a, const std::string& b) { return lower(a) < lower(b); });
}

// A number, integer, boolean or null (or a list of those types).
bool scalar(const Json& s) {
  if (!s.is_object() || !s.contains("type") || s.contains("enum") || s.contains("const") || s.contains("anyOf") ||
      s.contains("oneOf") || s.contains("$ref"))
    return false;
  auto one = [](const Json& t) { return t == "number" || t == "integer" || t == "boolean" || t == "null"; };
  if (s["type"].is_array()) {
    for (const auto& t : s["type"]) {
      if (!one(t)) return false;
    }
    return !s["type"].empty();
  }
  return one(s["type"]);
}

Json parse_parameters(std::string_view parameters_json) {
  Json p = Json::parse(parameters_json, nullptr, false);
  if (p.is_discarded()) fail("the parameters are not valid JSON");
  return p;
}

class PairCompiler {
 public:
  PairCompiler(const Json& schema, std::string_view schema_json, const CallSyntax& syntax, const std::string& prefix)
      : schema_(schema), schema_json_(schema_json), syntax_(syntax), prefix_(prefix) {}

  PairRules compile() {
    if (!schema_.is_object()) fail("the parameters must be a JSON schema object");
    out_.expression = members(schema_, "", "", false, 0);
    return std::move(out_);
  }

 private:
  std::string rule(const std::string& name, const std::string& body) {
    const std::string full = prefix_ + name;
    out_.rules += fmt::format("{} ::= {}\n", full, body);
    return full;
  }

  // An object's properties as pairs (the top level: the pair pattern, its separator) or, `nested`, as members
  // (at least one: nested markup cannot tell an empty object from empty text).
  std::string members(const Json& s, const std::string& pointer, const std::string& hint, bool nested, int depth) {
    const Json props = s.contains("properties") ? s["properties"] : Json::object();
    if (!props.is_object()) fail("properties must be an object");
    if (nested && props.empty()) fail("an object without properties cannot be written in this model's call markup");
    std::set<std::string> required;
    if (s.contains("required")) {
      for (const auto& r : s["required"]) {
        if (!r.is_string() || !props.contains(r.get<std::string>()))
          fail("required names '{}', which is not in properties", r.dump());
        required.insert(r.get<std::string>());
      }
    }
    std::vector<std::string> keys, pairs;
    for (const auto& [key, sub] : props.items()) keys.push_back(key);
    if (syntax_.sorted_keys && !nested) sort_keys(keys);
    for (size_t i = 0; i < keys.size(); ++i) {
      const Json& sub = props[keys[i]];
      const std::string at = pointer + "/properties/" + escape_pointer(keys[i]), h = fmt::format("{}v{}", hint, i);
      if (!nested) {
        const bool text = text_schema(sub);
        pairs.push_back(
            rule("pair-" + h, pattern(!text && !syntax_.pair_json.empty() ? syntax_.pair_json : syntax_.pair, keys[i],
                                      sub, at, h, depth)));
      } else {
        pairs.push_back(rule("pair-" + h, pattern(syntax_.member, keys[i], sub, at, h, depth)));
      }
    }
    // first[i]: properties i.. with none written yet; rest[i]: the same after one (a separator first).
    const size_t n = keys.size();
    std::vector<std::string> first(n + 1), rest(n + 1);
    const std::string sep = syntax_.pair_sep.empty() || nested ? "" : quote_literal(syntax_.pair_sep) + " ";
    for (size_t k = n; k-- > 0;) {
      const std::string after = k + 1 < n ? rest[k + 1] : "";
      std::string f = fmt::format("{} {}", pairs[k], after), r = fmt::format("{}{} {}", sep, pairs[k], after);
      if (!required.contains(keys[k])) {
        if (k + 1 < n || !nested) f += fmt::format(" | {}", k + 1 < n ? first[k + 1] : std::string());
        r += fmt::format(" | {}", after);
      }
      first[k] = rule(fmt::format("{}from-{}", hint, k), f);
      rest[k] = rule(fmt::format("{}then-{}", hint, k), r);
    }
    return n ? first[0] : "";
  }

  static std::string escape_pointer(const std::string& key) {
    std::string out;
    for (char c : key) out += c == '~' ? "~0" : c == '/' ? "~1" : std::string(1, c);
    return out;
  }

  // A list or an object the template writes as nested markup (CallSyntax::item / member).
  bool nests(const Json& s) const {
    if (!s.is_object() || !s.contains("type") || s.contains("enum") || s.contains("const") || s.contains("anyOf") ||
        s.contains("oneOf") || s.contains("$ref"))
      return false;
    return (s["type"] == "array" && !syntax_.item.empty()) || (s["type"] == "object" && !syntax_.member.empty());
  }

  // A nested list (at least one item: no items would read as empty text) or object.
  std::string nested(const Json& s, const std::string& pointer, const std::string& hint, int depth) {
    if (depth > 16) fail("values nested deeper than 16 levels cannot be written in this model's call markup");
    if (s["type"] == "object") return members(s, pointer, hint + "o", true, depth + 1);
    if (!s.contains("items") || !s["items"].is_object())
      fail("a list without an items schema cannot be written in this model's call markup");
    const auto count = [&](const char* k, int64_t fallback) {
      if (!s.contains(k)) return fallback;
      if (!s[k].is_number_integer() || s[k].get<int64_t>() < 0 || s[k].get<int64_t>() > 1000)
        fail("{} must be an integer in [0, 1000]", k);
      return s[k].get<int64_t>();
    };
    const int64_t lo = std::max<int64_t>(1, count("minItems", 0)), hi = count("maxItems", -1);
    if (hi >= 0 && hi < lo) fail("a list of no items cannot be written in this model's call markup");
    const std::string item =
        rule("item-" + hint, pattern(syntax_.item, "", s["items"], pointer + "/items", hint + "i", depth + 1));
    return hi < 0 ? fmt::format("{}{{{},}}", item, lo) : fmt::format("{}{{{},{}}}", item, lo, hi);
  }

  // A pair, member or item pattern with the key written in and the value's grammar (`key` "" for an item).
  std::string pattern(const std::vector<CallPiece>& pieces, const std::string& key, const Json& sub,
                      const std::string& pointer, const std::string& hint, int depth) {
    std::string e;
    for (size_t p = 0; p < pieces.size(); ++p) {
      const CallPiece& piece = pieces[p];
      const std::string_view next = p + 1 < pieces.size() && pieces[p + 1].kind == CallPiece::Text
                                        ? std::string_view(pieces[p + 1].text)
                                        : std::string_view();
      if (piece.kind == CallPiece::Text) {
        if (!piece.text.empty()) e += quote_literal(piece.text) + " ";
      } else if (piece.kind == CallPiece::Key) {
        const Terminator t = terminator(next);
        if (key.empty() || (!t.stop.empty() && key.find(t.stop) != std::string::npos))
          fail("parameter '{}' cannot be written in this model's call markup", key);
        for (char c : key) {
          if (!key_char_ok(c)) fail("parameter '{}' cannot be written in this model's call markup", key);
        }
        e += quote_literal(key) + " ";
      } else if (piece.kind == CallPiece::Value) {
        const Terminator t = terminator(next);
        if (t.stop.empty()) fail("the call markup has no text after a value");
        try {
          if (text_schema(sub)) {
            e += text_value(sub, prefix_ + hint, t);
          } else if (syntax_.python_bools && depth == 0 && sub.is_object() && sub.value("type", Json()) == "boolean" &&
                     !sub.contains("enum") && !sub.contains("const")) {
            e += "( \"True\" | \"False\" ) " + quote_literal(next) + " ";
          } else if (nests(sub)) {
            e += nested(sub, pointer, hint, depth) + " " + quote_literal(next) + " ";
          } else {
            e += json_value(sub, pointer, prefix_ + hint, t);
          }
        } catch (const Error& err) {
          if (depth > 0) throw;
          fail("parameter '{}': {}", key, err.what());
        }
        ++p;  // the value's expression wrote the literal after it
      }
    }
    if (depth > 0 && !key.empty()) check_item_key(key);
    return e;
  }

  // A member written like a list item ("<item>") would read as one.
  void check_item_key(const std::string& key) const {
    if (!key.empty() && key[0] == '/')
      fail("a member named '{}' would read as a closing tag in this model's call markup", key);
    if (syntax_.item.empty() || syntax_.member.empty() || key.empty()) return;
    auto before_value = [](const std::vector<CallPiece>& pieces, const std::string& k) {
      std::string out;
      for (const auto& piece : pieces) {
        if (piece.kind == CallPiece::Value) break;
        out += piece.kind == CallPiece::Key ? k : piece.text;
      }
      return out;
    };
    if (before_value(syntax_.member, key) == before_value(syntax_.item, key))
      fail("a member named '{}' would read as a list item in this model's call markup", key);
  }

  // A text value and the literal after it.
  std::string text_value(const Json& s, const std::string& hint, const Terminator& t) {
    const std::string after = fmt::format("{} {}", quote_literal(t.lead + t.stop), optional_literal(t.rest));
    auto raw = [&](const Json& v) {
      const std::string text = v.get<std::string>();
      if ((text + t.lead + t.stop).find(t.stop) < text.size() + t.lead.size())
        fail("the value '{}' holds '{}', which ends it in the markup", text, t.stop);
      for (const auto& tag : syntax_.avoid) {
        if (text.find(tag) != std::string::npos) fail("the value '{}' holds '{}', which ends the call", text, tag);
      }
      return quote_literal(text);
    };
    if (s.contains("const")) return fmt::format("{} {} ", raw(s["const"]), after);
    if (s.contains("enum")) {
      std::string body;
      for (const auto& v : s["enum"]) body += fmt::format("{}{}", body.empty() ? "" : " | ", raw(v));
      out_.rules += fmt::format("{} ::= {}\n", hint, body);
      return fmt::format("{} {} ", hint, after);
    }
    const auto bound = [&](const char* k, int fallback) {
      if (!s.contains(k)) return fallback;
      if (!s[k].is_number_integer() || s[k].get<int64_t>() < 0 || s[k].get<int64_t>() > 10000)
        fail("{} must be an integer in [0, 10000]", k);
      return static_cast<int>(s[k].get<int64_t>());
    };
    const int min = bound("minLength", 0), max = bound("maxLength", -1);
    if (max >= 0 && max < min) fail("maxLength is below minLength");
    if (min == 0 && max < 0) {
      out_.rules += text_until_rules(hint, t.lead, t.stop, syntax_.avoid);
      return fmt::format("{} {} ", hint, optional_literal(t.rest));
    }
    // Counted characters: none may start the tag, so none can complete it (nor a tag to avoid, which starts alike).
    check_avoid(t.stop, 1);
    out_.rules += text_char_rule(hint + "-char", static_cast<uint8_t>(t.stop[0]));
    const std::string reps = max < 0 ? fmt::format("{{{},}}", min) : fmt::format("{{{},{}}}", min, max);
    return fmt::format("{}-char{} {} ", hint, reps, after);
  }

  // A JSON value (its strings without the tag's first byte followed by its second) and the literal after it. JSON
  // punctuation never is the tag's first byte, except where the tag is a lone bracket (MiniMax M3's "]"): then only
  // scalars, which hold no punctuation.
  std::string json_value(const Json& sub, const std::string& pointer, const std::string& hint, const Terminator& t) {
    const auto first = static_cast<uint8_t>(t.stop[0]);
    const bool punct = std::string_view("{}[],:").find(static_cast<char>(first)) != std::string::npos;
    if (first < 0x21 || first >= 0x7f || std::isalnum(first) ||
        std::string_view("\"\\+-.").find(static_cast<char>(first)) != std::string::npos || (punct && !scalar(sub)))
      fail("a value of this type cannot be told from the tag '{}' after it in this model's call markup", t.stop);
    check_avoid(t.stop, 2);
    out_.json_tags.insert(t.stop);
    const SchemaRules r = json_schema_rules(schema_json_, hint + "-", {pair_json_base(t.stop), pointer});
    out_.rules += r.rules;
    return fmt::format("{} {} ", r.expression, quote_literal(t.lead + t.stop + t.rest));
  }

  // Values that leave out the tag's first `n` bytes in a row leave out the tags to avoid when they start alike.
  void check_avoid(std::string_view stop, size_t n) const {
    for (const auto& tag : syntax_.avoid) {
      if (tag.size() < n || stop.size() < n || tag.compare(0, n, stop, 0, n) != 0)
        fail("the markup's value tag '{}' and the tag '{}' cannot both be kept out of a value", stop, tag);
    }
  }

  const Json& schema_;
  std::string_view schema_json_;
  const CallSyntax& syntax_;
  std::string prefix_;
  PairRules out_;
};

}  // namespace

namespace {

void text_paths(const Json& s, const std::string& path, int depth, std::vector<std::string>& out) {
  if (depth > 16 || !s.is_object()) return;
  if (text_schema(s)) {
    out.push_back(path);
  } else if (s.contains("items") && s["items"].is_object()) {
    text_paths(s["items"], path + kItemPath, depth + 1, out);
  } else if (s.contains("properties") && s["properties"].is_object()) {
    for (const auto& [key, sub] : s["properties"].items()) text_paths(sub, path + kMemberPath + key, depth + 1, out);
  }
}

}  // namespace

std::vector<std::string> text_parameters(std::string_view parameters_json) {
  const Json p = Json::parse(parameters_json, nullptr, false);
  std::vector<std::string> out;
  if (!p.is_object() || !p.contains("properties") || !p["properties"].is_object()) return out;
  for (const auto& [key, sub] : p["properties"].items()) text_paths(sub, key, 0, out);
  return out;
}

PairRules pair_arguments(std::string_view parameters_json, const CallSyntax& syntax, const std::string& prefix) {
  const Json schema = parse_parameters(parameters_json);
  return PairCompiler(schema, parameters_json, syntax, prefix).compile();
}

std::string pair_json_base(std::string_view tag) {
  std::string base = "mj";
  for (char c : tag) base += fmt::format("{:02x}", static_cast<uint8_t>(c));
  return base + "-";
}

std::string pair_base_rules(const std::set<std::string>& json_tags) {
  std::string out;
  for (const auto& tag : json_tags) out += json_base_rules(pair_json_base(tag), tag);
  return out;
}

}  // namespace tessera::grammar
