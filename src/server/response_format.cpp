// response_format and the grammar extension fields to a compiled grammar; every error names the parameter.
#include "server/response_format.h"

#include "grammar/json_schema.h"
#include "grammar/parser.h"
#include "server/openai_api.h"

namespace tessera::server {

namespace {

using Json = nlohmann::ordered_json;

OutputGrammar compile(std::string text, const std::string& param) {
  OutputGrammar g;
  try {
    g.compiled = std::make_shared<grammar::Grammar>(grammar::parse_grammar(text));
  } catch (const Error& e) {
    invalid_param(param, "Invalid '{}': {}", param, e.what());
  }
  g.text = std::move(text);
  return g;
}

OutputGrammar from_schema(const Json& schema, const std::string& param) {
  if (!schema.is_object() && !schema.is_boolean()) invalid_param(param, "Invalid '{}': expected an object.", param);
  std::string text;
  try {
    text = grammar::json_schema_grammar(schema.dump());
  } catch (const Error& e) {
    invalid_param(param, "Invalid '{}': {}", param, e.what());
  }
  return compile(std::move(text), param);
}

}  // namespace

OutputGrammar parse_response_format(const Json& v) {
  const std::string param = "response_format";
  if (!v.is_object()) invalid_param(param, "Invalid type for 'response_format': expected an object.");
  const auto type = v.find("type");
  if (type == v.end() || !type->is_string())
    invalid_param(param, "Missing required parameter: 'response_format.type'.");
  if (*type == "text") return {};
  if (*type == "json_object") return compile(grammar::json_object_grammar(), param);
  if (*type != "json_schema") {
    invalid_param(param + ".type",
                  "Invalid value: '{}'. Supported values are: 'text', 'json_object' and 'json_schema'.",
                  type->get<std::string>());
  }
  const auto js = v.find("json_schema");
  if (js == v.end() || !js->is_object()) {
    invalid_param(param + ".json_schema", "Missing required parameter: 'response_format.json_schema'.");
  }
  const auto name = js->find("name");
  if (name == js->end() || !name->is_string()) {
    invalid_param(param + ".json_schema.name", "Missing required parameter: 'response_format.json_schema.name'.");
  }
  const auto strict = js->find("strict");
  if (strict != js->end() && !strict->is_boolean() && !strict->is_null()) {
    invalid_param(param + ".json_schema.strict",
                  "Invalid type for 'response_format.json_schema.strict': expected a boolean.");
  }
  // Without a schema OpenAI accepts any JSON object; constrained output is always strict here.
  const auto schema = js->find("schema");
  if (schema == js->end() || schema->is_null()) return compile(grammar::json_object_grammar(), param);
  return from_schema(*schema, param + ".json_schema.schema");
}

OutputGrammar parse_json_schema_field(const Json& v) { return from_schema(v, "json_schema"); }

OutputGrammar parse_grammar_field(const Json& v) {
  if (!v.is_string()) invalid_param("grammar", "Invalid type for 'grammar': expected a string.");
  return compile(v.get<std::string>(), "grammar");
}

}  // namespace tessera::server
