// Structured output in the API: response_format ({"type": "text" | "json_object" | "json_schema"}) for both
// endpoints, and /v1/completions' extension fields "json_schema" (a schema) and "grammar" (grammar text). Each
// becomes grammar text compiled once here; a bad schema or grammar is a 400 naming what is wrong.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "grammar/grammar.h"

namespace tessera::server {

struct OutputGrammar {
  std::string text;  // "" for unconstrained output
  std::shared_ptr<const grammar::Grammar> compiled;
};

// `value` is the field as parsed keeping key order, so a schema's properties come out in the declared order.
OutputGrammar parse_response_format(const nlohmann::ordered_json& value);
OutputGrammar parse_json_schema_field(const nlohmann::ordered_json& value);  // completions: "json_schema"
OutputGrammar parse_grammar_field(const nlohmann::ordered_json& value);      // completions: "grammar"

}  // namespace tessera::server
