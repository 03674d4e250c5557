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
SchemaRules json_schema_rules(std::string_view schema_json, const std::string& prefix);

// Grammar text for any JSON object (OpenAI's response_format json_object).
std::string json_object_grammar();

// The shared rules (ws, value, object, array, string, number, integer, boolean, null) every JSON grammar uses,
// named json-* (plus ws): to append to grammars that reference them.
std::string json_base_rules();

}  // namespace tessera::grammar
