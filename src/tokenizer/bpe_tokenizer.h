// Byte-level BPE tokenizer (`tokenizer.ggml.model == "gpt2"`): regex pre-tokenization chosen by
// `tokenizer.ggml.pre`, GPT-2's byte-to-unicode mapping, and merges applied by rank.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "gguf/gguf_value.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/symbol_merge.h"
#include "tokenizer/tokenizer.h"

namespace tessera {

class BpeTokenizer final : public Tokenizer {
 public:
  explicit BpeTokenizer(const gguf::Metadata& md);

  std::vector<TokenId> encode(std::string_view text, bool add_special, bool parse_special) const override;
  std::string token_to_piece(TokenId id, bool render_special = false) const override;

  const PreTokenizer& pre_tokenizer() const { return pre_; }

 private:
  BpeTokenizer(const gguf::Metadata& md, const PreTokenizerConfig& config);

  struct Merge {
    int32_t rank;
    TokenId merged;
  };
  static uint64_t pair_key(TokenId left, TokenId right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
  }
  void read_merges(const gguf::Metadata& md);
  // Scratch buffers are passed in so one encode call reuses them across words.
  void encode_word(std::string_view word, std::string& encoded, std::vector<MergeSymbol>& syms,
                   std::vector<TokenId>& out) const;

  PreTokenizer pre_;
  std::unordered_map<uint64_t, Merge> merges_;  // (left id, right id) -> rank and result
};

}  // namespace tessera
