// Schema to grammar: one rule per schema node, named after its path; objects list their properties in the
// declared order (required ones always, optional ones maybe), arrays bound their length by minItems/maxItems.
#include "grammar/json_schema.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "grammar/free_text.h"
#include "grammar/parser.h"
#include "util/error.h"

namespace tessera::grammar {

namespace {

using Json = nlohmann::ordered_json;

// Gemma 4's string quote and the end of its call, which no value may hold.
constexpr std::string_view kGemmaQuote = "<|\"|>", kGemmaCallEnd = "<tool_call|>";

// \u escapes stop short of the UTF-16 surrogates (D800-DFFF): a lone one is invalid JSON to strict parsers, and
// characters beyond the BMP can be written as UTF-8.
// Digits a number may have: enough for any double, and a bound a random sampler cannot run past.
constexpr const char* kBase = R"grammar(ws ::= | " " | "\n" [ \t]{0,20}
json-value ::= json-object | json-array | json-string | json-number | json-boolean | json-null
json-object ::= "{" ws ( json-string ws ":" ws json-value ( ws "," ws json-string ws ":" ws json-value )* )? ws "}"
json-array ::= "[" ws ( json-value ( ws "," ws json-value )* )? ws "]"
json-char ::= [\x20-\x21\x23-\x5b\x5d-\x7f] | [\xc2-\xdf] [\x80-\xbf] | "\xe0" [\xa0-\xbf] [\x80-\xbf] | [\xe1-\xec\xee\xef] [\x80-\xbf] [\x80-\xbf] | "\xed" [\x80-\x9f] [\x80-\xbf] | "\xf0" [\x90-\xbf] [\x80-\xbf] [\x80-\xbf] | [\xf1-\xf3] [\x80-\xbf] [\x80-\xbf] [\x80-\xbf] | "\xf4" [\x80-\x8f] [\x80-\xbf] [\x80-\xbf] | "\\" ( ["\\/bfnrt] | "u" ( [0-9a-cA-Ce-fE-F] [0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2} ) )
json-string ::= "\"" json-char* "\""
json-integer ::= "-"? ( "0" | [1-9] [0-9]{0,15} )
json-number ::= json-integer ( "." [0-9]{1,16} )? ( [eE] [+-]? [0-9]{1,3} )?
json-boolean ::= "true" | "false"
json-null ::= "null"
)grammar";

// Keywords that only describe or annotate; a grammar can ignore them without producing invalid output.
const std::set<std::string> kIgnored = {"$schema",   "$id",      "$comment", "title",      "description",
                                        "default",   "examples", "format",   "deprecated", "readOnly",
                                        "writeOnly", "strict",   "name"};
// Keywords the compiler understands.
const std::set<std::string> kKnown = {"type",      "properties", "required", "additionalProperties",
                                      "items",     "enum",       "const",    "anyOf",
                                      "oneOf",     "minItems",   "maxItems", "minLength",
                                      "maxLength", "$ref",       "$defs",    "definitions"};

class Compiler {
 public:
  Compiler(const Json& root, std::string prefix, const SchemaOptions& options = {})
      : root_(root), prefix_(std::move(prefix)), base_(options.base), gemma_(options.notation == Notation::Gemma) {
    if (gemma_) base_ = "gm-";
  }

  // The expression for the whole document; rules() then holds the rules it needs (the base rules aside).
  std::string compile() { return node(root_, "", "root"); }
  // The expression for the node at a JSON pointer into the document (its $refs still resolve from the top).
  std::string compile_at(const std::string& pointer) {
    const Json* at = nullptr;
    try {
      at = &root_.at(Json::json_pointer(pointer));
    } catch (const std::exception&) {
      error(pointer, "names nothing in the document");
    }
    return node(*at, pointer, "root");
  }
  const std::string& rules() const { return rules_; }

 private:
  [[noreturn]] static void error(const std::string& path, const std::string& message) {
    fail("json_schema at '{}': {}", path.empty() ? "/" : path, message);
  }

  std::string name_for(const std::string& hint) {
    std::string base;
    for (char c : hint) base += (std::isalnum(static_cast<unsigned char>(c)) || c == '-') ? c : '-';
    if (base.empty()) base = "s";
    std::string name = prefix_ + base;
    for (int i = 2; !used_.insert(name).second; ++i) name = fmt::format("{}{}-{}", prefix_, base, i);
    return name;
  }

  std::string add_rule(const std::string& hint, const std::string& body) {
    const std::string name = name_for(hint);
    rules_ += name + " ::= " + body + "\n";
    return name;
  }

  // The grammar expression (a rule name or a literal) for one schema node.
  std::string node(const Json& s, const std::string& path, const std::string& hint) {
    if (++depth_ > 64) error(path, "schema nests deeper than 64 levels");
    std::string out = node_inner(s, path, hint);
    --depth_;
    return out;
  }

  std::string node_inner(const Json& s, const std::string& path, const std::string& hint) {
    if (s.is_boolean()) {
      if (!s.get<bool>()) error(path, "the schema 'false' allows nothing");
      return base_ + "value";
    }
    if (!s.is_object()) error(path, "a schema must be an object or a boolean");
    for (const auto& [key, value] : s.items()) {
      if (!kKnown.contains(key) && !kIgnored.contains(key)) error(path, "unsupported keyword '" + key + "'");
    }
    if (s.contains("$ref")) return ref(s, path);
    if (s.contains("const")) return quote_literal(literal(s["const"], path));
    if (s.contains("enum")) {
      const Json& e = s["enum"];
      if (!e.is_array() || e.empty()) error(path + "/enum", "enum must be a non-empty array");
      std::string body;
      for (const auto& v : e) body += (body.empty() ? "" : " | ") + quote_literal(literal(v, path));
      return add_rule(hint, body);
    }
    for (const char* key : {"anyOf", "oneOf"}) {
      if (!s.contains(key)) continue;
      const Json& list = s[key];
      if (!list.is_array() || list.empty()) error(path + "/" + key, std::string(key) + " must be a non-empty array");
      std::string body;
      for (size_t i = 0; i < list.size(); ++i) {
        body += (i ? " | " : "") + node(list[i], fmt::format("{}/{}/{}", path, key, i), fmt::format("{}-{}", hint, i));
      }
      return add_rule(hint, body);
    }
    if (!s.contains("type")) {
      if (s.contains("properties") || s.contains("additionalProperties")) return object(s, path, hint);
      if (s.contains("items")) return array(s, path, hint);
      return base_ + "value";
    }
    const Json& type = s["type"];
    if (type.is_array()) {
      if (type.empty()) error(path + "/type", "type must not be an empty list");
      std::string body;
      for (const auto& t : type) {
        if (!t.is_string()) error(path + "/type", "type must name types");
        body += (body.empty() ? "" : " | ") + typed(s, t.get<std::string>(), path, hint);
      }
      return add_rule(hint, body);
    }
    if (!type.is_string()) error(path + "/type", "type must be a string or a list of strings");
    return typed(s, type.get<std::string>(), path, hint);
  }

  std::string typed(const Json& s, const std::string& type, const std::string& path, const std::string& hint) {
    if (type == "object") return object(s, path, hint);
    if (type == "array") return array(s, path, hint);
    if (type == "string") return string(s, path, hint);
    if (type == "number") return base_ + "number";
    if (type == "integer") return base_ + "integer";
    if (type == "boolean") return base_ + "boolean";
    if (type == "null") return base_ + "null";
    error(path + "/type", "unknown type '" + type + "'");
  }

  static int count(const Json& s, const char* key, const std::string& path, int fallback) {
    if (!s.contains(key)) return fallback;
    const Json& v = s[key];
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > 10000) {
      error(path + "/" + key, std::string(key) + " must be an integer in [0, 10000]");
    }
    return static_cast<int>(v.get<int64_t>());
  }

  std::string string(const Json& s, const std::string& path, const std::string& hint) {
    const int min = count(s, "minLength", path, 0);
    const int max = count(s, "maxLength", path, -1);
    if (min == 0 && max < 0) return base_ + "string";
    if (max >= 0 && max < min) error(path, "maxLength is below minLength");
    const std::string reps = max < 0 ? fmt::format("{{{},}}", min) : fmt::format("{{{},{}}}", min, max);
    if (gemma_) return add_rule(hint, fmt::format("{0} gm-char{1} {0}", quote_literal(kGemmaQuote), reps));
    return add_rule(hint, "\"\\\"\" " + base_ + "char" + reps + " \"\\\"\"");
  }

  // A const or enum value as the notation writes it.
  std::string literal(const Json& v, const std::string& path) const {
    if (!gemma_) return v.dump();
    if (v.is_string()) {
      const std::string t = v.get<std::string>();
      if (t.find(kGemmaQuote) != std::string::npos || t.find(kGemmaCallEnd) != std::string::npos)
        error(path, "a value holds Gemma's string or call markers");
      return std::string(kGemmaQuote) + t + std::string(kGemmaQuote);
    }
    if (v.is_array()) {
      std::string out = "[";
      for (const auto& x : v) out += fmt::format("{}{}", out.size() > 1 ? "," : "", literal(x, path));
      return out + "]";
    }
    if (v.is_object()) {
      std::string out = "{";
      for (const auto& [k, x] : v.items())
        out += fmt::format("{}{}:{}", out.size() > 1 ? "," : "", gemma_key(k), literal(x, path));
      return out + "}";
    }
    return v.dump();
  }

  // Gemma writes keys bare; one that a bare key cannot hold is quoted (its reader takes both).
  static std::string gemma_key(const std::string& k) {
    bool bare = !k.empty();
    for (char c : k) {
      bare = bare && c != ':' && c != '<' && c != '{' && c != '}' && c != '[' && c != ']' && c != ',' && c != ' ' &&
             c != '\n' && c != '\t' && c != '\r';
    }
    if (bare) return k;
    if (k.find(kGemmaQuote) != std::string::npos) fail("the key '{}' holds Gemma's string marker", k);
    return std::string(kGemmaQuote) + k + std::string(kGemmaQuote);
  }

  std::string array(const Json& s, const std::string& path, const std::string& hint) {
    const int min = count(s, "minItems", path, 0);
    const int max = count(s, "maxItems", path, -1);
    if (max >= 0 && max < min) error(path, "maxItems is below minItems");
    const std::string item = s.contains("items") ? node(s["items"], path + "/items", hint + "-item") : base_ + "value";
    if (max == 0) return add_rule(hint, "\"[\" ws \"]\"");
    const std::string more = fmt::format("( ws \",\" ws {} ){{{},{}}}", item, std::max(min - 1, 0),
                                         max < 0 ? std::string() : std::to_string(max - 1));
    std::string body = fmt::format("\"[\" ws {} {} ws \"]\"", item, more);
    if (min == 0) body += " | \"[\" ws \"]\"";
    return add_rule(hint, body);
  }

  std::string object(const Json& s, const std::string& path, const std::string& hint) {
    const bool has_props = s.contains("properties");
    if (has_props && !s["properties"].is_object()) error(path + "/properties", "properties must be an object");
    std::set<std::string> required;
    if (s.contains("required")) {
      if (!s["required"].is_array()) error(path + "/required", "required must be an array of names");
      for (const auto& r : s["required"]) {
        if (!r.is_string()) error(path + "/required", "required must be an array of names");
        if (!has_props || !s["properties"].contains(r.get<std::string>())) {
          error(path + "/required", "required property '" + r.get<std::string>() + "' is not in properties");
        }
        required.insert(r.get<std::string>());
      }
    }
    if (!has_props) {
      // No properties: a map whose values follow additionalProperties (any value when it is absent or true).
      const Json extra = s.contains("additionalProperties") ? s["additionalProperties"] : Json(true);
      if (extra.is_boolean() && !extra.get<bool>()) return add_rule(hint, "\"{\" ws \"}\"");
      const std::string value = node(extra, path + "/additionalProperties", hint + "-value");
      return add_rule(hint, fmt::format("\"{{\" ws ( {1}string {2}\":\" ws {0} ( ws \",\" ws {1}string {2}\":\" "
                                        "ws {0} )* )? ws \"}}\"",
                                        value, base_, gemma_ ? "" : "ws "));
    }
    // Properties in declared order; first[i] reads properties i.. with none written yet, rest[i] after one.
    std::vector<std::string> keys, values;
    for (const auto& [key, sub] : s["properties"].items()) keys.push_back(key);
    if (gemma_) {  // Gemma's template writes keys sorted (dictsort: ignoring case)
      auto lower = [](std::string k) {
        for (char& c : k) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        return k;
      };
      std::stable_sort(keys.begin(), keys.end(),
                       [&](const std::string& a, const std::string& b) { return lower(a) < lower(b); });
    }
    for (const auto& key : keys)
      values.push_back(node(s["properties"][key], path + "/properties/" + key, hint + "-" + key));
    const size_t n = keys.size();
    std::vector<std::string> first(n + 1), rest(n + 1);
    for (size_t i = n; i-- > 0;) {
      const std::string kv = gemma_
                                 ? fmt::format("ws {} \":\" ws {}", quote_literal(gemma_key(keys[i])), values[i])
                                 : fmt::format("ws {} ws \":\" ws {}", quote_literal(Json(keys[i]).dump()), values[i]);
      const std::string after = i + 1 < n ? rest[i + 1] : "";
      std::string f = kv + " " + after;
      std::string r = "ws \",\" " + kv + " " + after;
      if (!required.contains(keys[i])) {
        f += " | " + (i + 1 < n ? first[i + 1] : std::string());
        r += " | " + after;
      }
      first[i] = add_rule(hint + "-from-" + std::to_string(i), f);
      rest[i] = add_rule(hint + "-then-" + std::to_string(i), r);
    }
    return add_rule(hint, "\"{\" " + (n ? first[0] : std::string()) + " ws \"}\"");
  }

  std::string ref(const Json& s, const std::string& path) {
    const Json& r = s["$ref"];
    if (!r.is_string()) error(path + "/$ref", "$ref must be a string");
    const std::string target = r.get<std::string>();
    if (const auto it = refs_.find(target); it != refs_.end()) return it->second;
    if (target.rfind("#", 0) != 0) error(path + "/$ref", "only references within the document ('#/...') are supported");
    const std::string pointer = target.substr(1);
    const Json* at = nullptr;
    try {
      at = &root_.at(Json::json_pointer(pointer));
    } catch (const std::exception&) {
      error(path + "/$ref", "reference '" + target + "' names nothing in the document");
    }
    // Named before it is compiled, so a recursive reference refers to the rule being defined.
    const std::string name = name_for("ref" + pointer);
    refs_[target] = name;
    const std::string body = node(*at, pointer, "ref" + pointer + "-body");
    rules_ += name + " ::= " + body + "\n";
    return name;
  }

  const Json& root_;
  std::string prefix_;
  std::string base_;  // the base rules' names start with it
  bool gemma_;        // Notation::Gemma
  std::string rules_;
  std::set<std::string> used_;
  std::map<std::string, std::string> refs_;
  int depth_ = 0;
};

}  // namespace

std::string json_base_rules() { return kBase; }

std::string gemma_base_rules() {
  // Exponents of two digits: the reader parses the numbers, and 1e400 is none.
  return std::string(R"grammar(gm-value ::= gm-object | gm-array | gm-string | gm-number | json-boolean | json-null
gm-object ::= "{" ws ( gm-string ":" ws gm-value ( ws "," ws gm-string ":" ws gm-value )* )? ws "}"
gm-array ::= "[" ws ( gm-value ( ws "," ws gm-value )* )? ws "]"
gm-number ::= json-integer ( "." [0-9]{1,16} )? ( [eE] [+-]? [0-9]{1,2} )?
gm-integer ::= json-integer
gm-boolean ::= json-boolean
gm-null ::= json-null
)grammar") +
         "gm-string ::= " + quote_literal(kGemmaQuote) + " gm-text\n" +
         text_until_rules("gm-text", "", kGemmaQuote, {std::string(kGemmaCallEnd)}) + text_char_rule("gm-char", '<');
}

std::string json_base_rules(const std::string& base, std::string_view tag) {
  const auto excluded = static_cast<uint8_t>(tag.empty() ? 0 : tag[0]);
  if (excluded < 0x20 || excluded == '"' || excluded == '\\' || excluded >= 0x80)
    fail("JSON strings cannot leave out a tag starting with byte 0x{:02x}", excluded);
  std::string rules = kBase;
  rules.erase(0, rules.find('\n') + 1);  // ws is shared
  for (size_t p = rules.find("json-"); p != std::string::npos; p = rules.find("json-", p + base.size())) {
    rules.replace(p, 5, base);
  }
  // The first ASCII class of the string characters, less the excluded byte (which a \u escape still writes).
  const std::string ascii = "[\\x20-\\x21\\x23-\\x5b\\x5d-\\x7f]";
  const size_t at = rules.find(ascii);
  if (at == std::string::npos) fail("the JSON string rule has changed shape");
  auto ascii_class = [&](int also) {
    std::string cls = "[";
    for (unsigned b = 0x20; b < 0x80; ++b) {
      if (b != '"' && b != '\\' && b != excluded && static_cast<int>(b) != also) cls += fmt::format("\\x{:02x}", b);
    }
    return cls + "]";
  };
  rules.replace(at, ascii.size(), ascii_class(-1));
  // Exponents of two digits: a reader that parses the value (these are) must not meet 1e400.
  const std::string exponent = "[eE] [+-]? [0-9]{1,3}";
  rules.replace(rules.find(exponent), exponent.size(), "[eE] [+-]? [0-9]{1,2}");
  // Unbounded strings may hold the byte where the tag's second byte does not follow it: a run of it, then a
  // character other than the second byte (char-after: char with that class), or the string's end.
  const auto second = static_cast<uint8_t>(tag.size() > 1 ? tag[1] : 0);
  if (second >= 0x20 && second < 0x80 && second != '"' && second != '\\' && second != excluded) {
    const std::string str = base + "string ::= \"\\\"\" " + base + "char* \"\\\"\"\n";
    const size_t s = rules.find(str);
    const size_t c = rules.find(base + "char ::= ");
    if (s == std::string::npos || c == std::string::npos) fail("the JSON string rule has changed shape");
    std::string after = rules.substr(c, rules.find('\n', c) + 1 - c);
    after.replace(0, base.size() + 4, base + "char-after");
    after.replace(after.find(ascii_class(-1)), ascii_class(-1).size(), ascii_class(second));
    const std::string lone = quote_literal(std::string(1, static_cast<char>(excluded)));
    rules.replace(
        s, str.size(),
        fmt::format("{0}string ::= \"\\\"\" ( {0}char | {1}+ {0}char-after )* {1}* \"\\\"\"\n", base, lone) + after);
  }
  return rules;
}

std::string json_object_grammar() { return std::string("root ::= json-object\n") + kBase; }

std::string json_schema_grammar(std::string_view schema_json) {
  Json schema;
  try {
    schema = Json::parse(schema_json);
  } catch (const std::exception& e) {
    fail("json_schema is not valid JSON: {}", e.what());
  }
  Compiler c(schema, "s-");
  const std::string top = c.compile();
  return "root ::= " + top + "\n" + c.rules() + kBase;
}

SchemaRules json_schema_rules(std::string_view schema_json, const std::string& prefix, const SchemaOptions& options) {
  Json schema;
  try {
    schema = Json::parse(schema_json);
  } catch (const std::exception& e) {
    fail("json_schema is not valid JSON: {}", e.what());
  }
  Compiler c(schema, prefix, options);
  SchemaRules out;
  out.expression = options.pointer.empty() ? c.compile() : c.compile_at(options.pointer);
  out.rules = c.rules();
  return out;
}

}  // namespace tessera::grammar
