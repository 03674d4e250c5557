// The bridge from a tokenizer to grammar-constrained sampling: the vocabulary's byte trie (each token's bytes as
// the detokenizer writes them; control tokens never match, end-of-generation tokens end the grammar).
#pragma once

#include <memory>
#include <string>

#include "engine/sampler.h"
#include "grammar/token_trie.h"
#include "tokenizer/tokenizer.h"

namespace tessera {

std::shared_ptr<const grammar::TokenTrie> make_token_trie(const Tokenizer& tokenizer);

// Compiles `grammar_text` and constrains the sampler's picks with it (a no-op for ""). Builds the trie anew: a
// caller with many requests keeps one trie and calls Sampler::set_grammar itself. Throws Error for a bad grammar.
void constrain_sampler(Sampler& sampler, const std::string& grammar_text, const Tokenizer& tokenizer);

}  // namespace tessera
