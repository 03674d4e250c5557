// --json-schema FILE / --grammar FILE for `tessera run` and `tessera bench`: the grammar text a run constrains
// its output with (docs/structured-output.md).
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace tessera {

struct GrammarOptions {
  std::string json_schema_file;
  std::string grammar_file;

  // The grammar's text form, "" when neither option is given. Throws Error naming the file and what is wrong.
  std::string grammar_text() const;
};

void add_grammar_options(CLI::App& app, GrammarOptions& o);

}  // namespace tessera
