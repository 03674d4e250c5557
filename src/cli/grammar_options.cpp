// Grammar options: a schema file is compiled to grammar text here, a grammar file is checked here, so a bad file
// fails before the model loads.
#include "cli/grammar_options.h"

#include <fstream>
#include <sstream>

#include "grammar/json_schema.h"
#include "grammar/parser.h"
#include "util/error.h"

namespace tessera {

namespace {
std::string read_all(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("{}: cannot read {}", what, path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}
}  // namespace

std::string GrammarOptions::grammar_text() const {
  std::string text;
  try {
    if (!json_schema_file.empty()) text = grammar::json_schema_grammar(read_all(json_schema_file, "--json-schema"));
    if (!grammar_file.empty()) text = read_all(grammar_file, "--grammar");
    if (!text.empty()) (void)grammar::parse_grammar(text);
  } catch (const Error& e) {
    fail("{}: {}", json_schema_file.empty() ? grammar_file : json_schema_file, e.what());
  }
  return text;
}

void add_grammar_options(CLI::App& app, GrammarOptions& o) {
  auto* schema = app.add_option("--json-schema", o.json_schema_file,
                                "Constrain the output to JSON valid against this JSON schema file");
  auto* grammar = app.add_option("--grammar", o.grammar_file, "Constrain the output to this grammar file (GBNF-like)");
  schema->excludes(grammar);
}

}  // namespace tessera
