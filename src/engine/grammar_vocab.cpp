// make_token_trie: token_to_piece without special rendering, so a constrained output decodes to the very bytes
// the grammar matched.
#include "engine/grammar_vocab.h"

#include <string>
#include <vector>

#include "grammar/constraint.h"
#include "grammar/parser.h"

namespace tessera {

std::shared_ptr<const grammar::TokenTrie> make_token_trie(const Tokenizer& tokenizer) {
  std::vector<std::string> pieces(static_cast<size_t>(tokenizer.n_vocab()));
  std::vector<int32_t> ends;
  for (TokenId t = 0; t < tokenizer.n_vocab(); ++t) {
    if (tokenizer.is_eog(t)) {
      ends.push_back(t);
      continue;
    }
    if (!tokenizer.is_control(t)) pieces[static_cast<size_t>(t)] = tokenizer.token_to_piece(t, false);
  }
  return std::make_shared<grammar::TokenTrie>(pieces, std::move(ends));
}

void constrain_sampler(Sampler& sampler, const std::string& grammar_text, const Tokenizer& tokenizer) {
  if (grammar_text.empty()) return;
  auto g = std::make_shared<grammar::Grammar>(grammar::parse_grammar(grammar_text));
  sampler.set_grammar(grammar_text,
                      std::make_shared<grammar::TokenConstraint>(std::move(g), make_token_trie(tokenizer)));
}

}  // namespace tessera
