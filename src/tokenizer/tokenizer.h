// The public tokenizer interface: text <-> token ids for GGUF vocabularies (SPM "llama" and byte-level BPE
// "gpt2"), built from GGUF metadata, plus a streaming decoder that only releases complete UTF-8.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/gguf_value.h"
#include "tokenizer/utf8.h"
#include "tokenizer/vocab.h"

namespace tessera {

class Tokenizer {
 public:
  // Picks the implementation from `tokenizer.ggml.model`; throws Error naming the key or problem.
  static std::unique_ptr<Tokenizer> from_metadata(const gguf::Metadata& md);

  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;
  virtual ~Tokenizer();

  // add_special: add BOS/EOS as the vocab says (tokenizer.ggml.add_bos_token / add_eos_token, llama.cpp's defaults
  // when absent). parse_special: control tokens written in the text ("<s>", "<|im_start|>") become those tokens.
  // User-defined tokens are matched in the text either way, as in llama.cpp and Hugging Face tokenizers.
  virtual std::vector<TokenId> encode(std::string_view text, bool add_special, bool parse_special) const = 0;

  // The bytes of one token: byte tokens give their byte, SPM's U+2581 becomes a space, byte-level BPE text is
  // decoded. Control and unknown tokens give "" unless render_special. Throws Error for an out-of-range id.
  virtual std::string token_to_piece(TokenId id, bool render_special = false) const = 0;

  // Concatenated pieces. Like llama.cpp's detokenizer, when the vocab adds a space prefix (SPM) one leading space
  // is dropped from the first token's piece: decode(encode(text, false, false)) == text. A leading BOS consumes
  // that rule, so decode([BOS, "▁Hello"]) is " Hello", again as llama.cpp does.
  std::string decode(std::span<const TokenId> ids, bool render_special = false) const;

  const Vocab& vocab() const { return vocab_; }
  int32_t n_vocab() const { return vocab_.size(); }
  TokenId bos() const { return vocab_.bos(); }  // kNoToken (-1) when the vocab has none
  TokenId eos() const { return vocab_.eos(); }
  std::optional<TokenId> eot() const;
  bool add_bos() const { return vocab_.add_bos(); }
  bool add_eos() const { return vocab_.add_eos(); }
  // End of generation: EOS, EOT, EOM and chat terminators (<|im_end|>, <|eot_id|>, <|end|>, <end_of_turn>, ...).
  bool is_eog(TokenId id) const { return vocab_.is_eog(id); }
  bool is_control(TokenId id) const;                                                 // false for out-of-range ids
  const std::string& token_text(TokenId id) const { return vocab_.token(id).text; }  // raw vocab string
  std::optional<TokenId> find_token(std::string_view text) const { return vocab_.find(text); }

 protected:
  explicit Tokenizer(Vocab vocab);

  // A run of text to tokenize normally, or a special token matched verbatim.
  struct Fragment {
    std::string_view text;     // empty for a token fragment
    TokenId token = kNoToken;  // kNoToken for a text fragment
  };
  // Splits `text` around special tokens the way llama.cpp does: tokens are tried longest first, each taking
  // its leftmost non-overlapping occurrences in the text not yet claimed. Control and unknown tokens take part
  // only with parse_special; user-defined tokens always do.
  std::vector<Fragment> split_special(std::string_view text, bool parse_special) const;

  Vocab vocab_;

 private:
  struct SpecialIndex;
  std::unique_ptr<SpecialIndex> special_index_;
};

// Turns generated tokens into printable text as they arrive, holding back bytes of an unfinished UTF-8
// character (byte-fallback and byte-level tokens can split one). No leading-space stripping is applied.
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tokenizer, bool render_special = false)
      : tokenizer_(&tokenizer), render_special_(render_special) {}
  // Returns the text that is complete after adding this token (possibly "").
  std::string push(TokenId id);
  // Returns the held-back bytes, if any (an incomplete sequence at the end of generation).
  std::string flush() { return buffer_.flush(); }

 private:
  const Tokenizer* tokenizer_;
  bool render_special_;
  Utf8StreamBuffer buffer_;
};

}  // namespace tessera
