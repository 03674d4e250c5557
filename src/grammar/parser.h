// The text form of a grammar (GBNF-like, over bytes): `name ::= alternatives`, literals "..", byte classes [..],
// `.`, groups ( .. ), repetition * + ? {m} {m,} {m,n}, # comments. docs/structured-output.md has the syntax.
#pragma once

#include <string>
#include <string_view>

#include "grammar/grammar.h"

namespace tessera::grammar {

// Parses and validates a grammar whose start rule is `root`. Throws Error naming the line and column.
Grammar parse_grammar(std::string_view text);

// `bytes` as a literal of the text form: quotes and backslashes escaped, bytes outside printable ASCII as \xHH.
std::string quote_literal(std::string_view bytes);

}  // namespace tessera::grammar
