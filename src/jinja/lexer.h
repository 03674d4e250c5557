// Jinja lexer: splits template source into text and tag tokens with Jinja2's whitespace rules as Hugging Face
// configures them (trim_blocks, lstrip_blocks, `-` markers, one trailing newline dropped).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tessera::jinja {

enum class TokenType { Data, VarBegin, VarEnd, BlockBegin, BlockEnd, Name, String, Integer, Float, Operator, End };

struct Token {
  TokenType type;
  std::string text;  // Data text, name, unescaped string value, number text or operator
  int line = 1;
  int column = 1;
};

struct LexOptions {
  bool trim_blocks = true;
  bool lstrip_blocks = true;
  bool keep_trailing_newline = false;
};

std::vector<Token> tokenize(std::string_view source, const LexOptions& options = {});

}  // namespace tessera::jinja
