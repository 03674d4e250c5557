// Tool-call arguments as key/value pairs in a template's markup (tool_call.h's CallSyntax with json_args false):
// the grammar pieces tool_call.cpp puts where the arguments go.
#pragma once

#include <set>
#include <string>
#include <string_view>

#include "grammar/json_schema.h"
#include "grammar/tool_call.h"

namespace tessera::grammar {

struct PairRules {
  std::string expression;           // the pairs of one call ("" when the function takes no arguments)
  std::string rules;                // the rules it needs, named with the prefix
  std::set<std::string> json_tags;  // JSON values inside: the tags that end them (json_base_rules for each)
};

// One function's arguments; throws Error when a parameter cannot be written in the markup.
PairRules pair_arguments(std::string_view parameters_json, const CallSyntax& syntax, const std::string& prefix);

// The base rules the JSON values of pair_arguments use (json_base_rules for each byte).
std::string pair_base_rules(const std::set<std::string>& json_tags);

// The base-rule names for JSON closed by `tag`.
std::string pair_json_base(std::string_view tag);

}  // namespace tessera::grammar
