// libFuzzer target for structured output: grammar text (from API requests and --grammar files) and JSON schemas
// (response_format) must compile or fail with an Error; a schema the compiler accepts must give grammar text the
// parser accepts; the matcher must survive any bytes. The first input byte picks the mode; after a NUL come the
// bytes fed to the matcher.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>

#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "grammar/parser.h"
#include "grammar/token_trie.h"
#include "util/error.h"

namespace {

void feed(const tessera::grammar::Grammar& g, std::string_view bytes) {
  tessera::grammar::Matcher m(std::make_shared<tessera::grammar::Grammar>(g));
  // A small trie over the bytes themselves: the mask walk must agree with advancing byte by byte.
  std::vector<std::string> pieces;
  for (size_t i = 0; i + 2 <= bytes.size() && pieces.size() < 64; i += 2) pieces.emplace_back(bytes.substr(i, 2));
  pieces.emplace_back("");
  const tessera::grammar::TokenTrie trie(pieces, {static_cast<int32_t>(pieces.size() - 1)});
  std::vector<uint64_t> words((pieces.size() + 63) / 64);
  for (char c : bytes) {
    m.allowed_tokens(trie, words);
    for (size_t t = 0; t + 1 < pieces.size(); ++t) {
      const bool in_mask = (words[t / 64] >> (t % 64)) & 1;
      if (in_mask != m.allows(pieces[t])) abort();
    }
    if (!m.advance(static_cast<uint8_t>(c))) break;
  }
  (void)m.can_end();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view all(reinterpret_cast<const char*>(data) + 1, size - 1);
  const size_t nul = all.find('\0');
  const std::string_view text = all.substr(0, nul);
  const std::string_view bytes = nul == std::string_view::npos ? std::string_view() : all.substr(nul + 1);
  try {
    if (data[0] & 1) {
      std::string grammar_text;
      try {
        grammar_text = tessera::grammar::json_schema_grammar(text);
      } catch (const tessera::Error&) {
        return 0;
      }
      // The compiler's output must always be a valid grammar.
      try {
        feed(tessera::grammar::parse_grammar(grammar_text), bytes);
      } catch (const tessera::Error&) {
        abort();
      }
    } else {
      feed(tessera::grammar::parse_grammar(text), bytes);
    }
  } catch (const tessera::Error&) {
  }
  return 0;
}
