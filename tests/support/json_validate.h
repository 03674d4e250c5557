// A small JSON-schema validator for tests of structured output: the subset src/grammar compiles (type, properties,
// required, additionalProperties, items, enum, const, anyOf/oneOf, min/maxItems, min/maxLength, $ref). Returns
// "" when `doc` is valid, else the first problem and where.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace tessera::test {

inline size_t utf8_length(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

inline std::string json_invalid(const nlohmann::json& doc, const nlohmann::json& schema, const nlohmann::json& root,
                                const std::string& where = "/") {
  using nlohmann::json;
  if (schema.is_boolean()) return schema.get<bool>() ? "" : where + ": schema false";
  if (schema.contains("$ref")) {
    const std::string ref = schema["$ref"].get<std::string>();
    return json_invalid(doc, root.at(json::json_pointer(ref.substr(1))), root, where);
  }
  if (schema.contains("const") && doc != schema["const"]) return where + ": not the const value";
  if (schema.contains("enum")) {
    bool found = false;
    for (const auto& v : schema["enum"]) found = found || v == doc;
    if (!found) return where + ": not in enum: " + doc.dump();
  }
  for (const char* key : {"anyOf", "oneOf"}) {
    if (!schema.contains(key)) continue;
    int ok = 0;
    for (const auto& sub : schema[key]) ok += json_invalid(doc, sub, root, where).empty();
    if (ok == 0) return where + ": matches no " + key + " alternative";
    if (std::string(key) == "oneOf" && ok > 1) return where + ": matches several oneOf alternatives";
  }
  if (schema.contains("type")) {
    std::vector<std::string> types;
    if (schema["type"].is_array()) {
      for (const auto& t : schema["type"]) types.push_back(t);
    } else {
      types.push_back(schema["type"]);
    }
    bool ok = false;
    for (const auto& t : types) {
      ok = ok || (t == "object" && doc.is_object()) || (t == "array" && doc.is_array()) ||
           (t == "string" && doc.is_string()) || (t == "number" && doc.is_number()) ||
           (t == "integer" && doc.is_number_integer()) || (t == "boolean" && doc.is_boolean()) ||
           (t == "null" && doc.is_null());
    }
    if (!ok) return where + ": wrong type for " + doc.dump();
  }
  if (doc.is_object()) {
    if (schema.contains("required")) {
      for (const auto& r : schema["required"]) {
        if (!doc.contains(r.get<std::string>())) return where + ": missing required " + r.get<std::string>();
      }
    }
    const json props = schema.value("properties", json::object());
    for (const auto& [k, v] : doc.items()) {
      if (props.contains(k)) {
        auto e = json_invalid(v, props[k], root, where + k + "/");
        if (!e.empty()) return e;
      } else if (schema.contains("additionalProperties")) {
        auto e = json_invalid(v, schema["additionalProperties"], root, where + k + "/");
        if (!e.empty()) return where + ": additional property " + k + ": " + e;
      }
    }
  }
  if (doc.is_array()) {
    if (schema.contains("minItems") && doc.size() < schema["minItems"].get<size_t>()) return where + ": too few items";
    if (schema.contains("maxItems") && doc.size() > schema["maxItems"].get<size_t>()) return where + ": too many items";
    if (schema.contains("items")) {
      for (size_t i = 0; i < doc.size(); ++i) {
        auto e = json_invalid(doc[i], schema["items"], root, where + std::to_string(i) + "/");
        if (!e.empty()) return e;
      }
    }
  }
  if (doc.is_string()) {
    const size_t n = utf8_length(doc.get<std::string>());
    if (schema.contains("minLength") && n < schema["minLength"].get<size_t>()) return where + ": string too short";
    if (schema.contains("maxLength") && n > schema["maxLength"].get<size_t>()) return where + ": string too long";
  }
  return "";
}

// The schema the structured-output tests generate against: nested objects, arrays, enums, required and optional
// fields, bounded so that a random-weight model finishes well within the token limit.
inline const char* kTestSchema = R"({
  "type": "object",
  "properties": {
    "name": {"type": "string", "maxLength": 12},
    "kind": {"enum": ["cat", "dog", "bird"]},
    "age": {"type": "integer"},
    "owner": {
      "type": "object",
      "properties": {
        "verified": {"type": "boolean"},
        "tags": {"type": "array", "items": {"enum": ["a", "b", 3, null]}, "maxItems": 3}
      },
      "required": ["verified"]
    },
    "scores": {"type": "array", "items": {"$ref": "#/$defs/score"}, "minItems": 1, "maxItems": 2}
  },
  "required": ["name", "kind", "owner", "scores"],
  "$defs": {"score": {"type": "object", "properties": {"v": {"type": "boolean"}, "w": {"const": "x"}},
                      "required": ["v"]}}
})";

}  // namespace tessera::test
