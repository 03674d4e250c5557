// A JSON-schema subset compiled to grammar text (docs/structured-output.md lists it): the output of a grammar
// built from a schema parses as JSON and validates against that schema. Keywords that would constrain values
// beyond what the grammar enforces (pattern, minimum, ...) are refused rather than ignored.
#pragma once

#include <string>
#include <string_view>

namespace tessera::grammar {

// Grammar text for documents valid against the schema (JSON text). Throws Error naming the schema location
// (a JSON pointer) and what is wrong.
std::string json_schema_grammar(std::string_view schema_json);

// One schema's rules for a larger grammar: `expression` matches a valid document using `rules` (every rule name
// starting with `prefix`) and the base rules.
struct SchemaRules {
  std::string expression;
  std::string rules;
};
// How values are written: JSON, or Gemma 4's call notation (bare keys, strings between <|"|> markers, raw).
enum class Notation { Json, Gemma };
struct SchemaOptions {
  std::string base = "json-";  // the base rules the expression uses (json_base_rules(base, ..) for others)
  std::string pointer;         // the node to compile, a JSON pointer ("": the whole); $refs resolve from the top
  Notation notation = Notation::Json;  // Gemma: the base rules are gemma_base_rules' (base is ignored)
};
SchemaRules json_schema_rules(std::string_view schema_json, const std::string& prefix,
                              const SchemaOptions& options = {});

// The base rules of Notation::Gemma (gm-*; they use json-number and the like from json_base_rules()).
std::string gemma_base_rules();

// Grammar text for any JSON object (OpenAI's response_format json_object).
std::string json_object_grammar();

// The shared rules (ws, value, object, array, string, number, integer, boolean, null) every JSON grammar uses,
// named json-* (plus ws): to append to grammars that reference them.
std::string json_base_rules();
// The same rules under names starting with `base` (ws aside, which stays shared) whose strings never hold `tag`:
// JSON inside markup that the tag closes. The tag's first byte is left out of length-bounded strings (a \u escape
// still writes it) and, in others, never followed by the tag's second byte.
std::string json_base_rules(const std::string& base, std::string_view tag);

}  // namespace tessera::grammar
