// SentencePiece-style tokenizer (`tokenizer.ggml.model == "llama"`), following llama.cpp: spaces become U+2581,
// a leading space is added, adjacent pieces merge by best vocab score, and unknown characters fall back to
// <0xXX> byte tokens.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/gguf_value.h"
#include "tokenizer/tokenizer.h"

namespace tessera {

class SpmTokenizer final : public Tokenizer {
 public:
  explicit SpmTokenizer(const gguf::Metadata& md);

  std::vector<TokenId> encode(std::string_view text, bool add_special, bool parse_special) const override;
  std::string token_to_piece(TokenId id, bool render_special = false) const override;

 private:
  // Tokenizes text whose spaces are already U+2581.
  void encode_escaped(std::string_view text, std::vector<TokenId>& out) const;

  std::array<TokenId, 256> byte_fallback_{};  // the token for each byte, kNoToken if the vocab cannot spell it
  std::vector<int16_t> byte_value_;           // for byte-type tokens their byte, else -1
};

}  // namespace tessera
