// The token table of a GGUF tokenizer: texts, scores, types, text->id lookup, special ids and the
// add-BOS/EOS flags, read from `tokenizer.ggml.*` metadata with llama.cpp's defaults for absent keys.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "gguf/gguf_value.h"

namespace tessera {

using TokenId = int32_t;
inline constexpr TokenId kNoToken = -1;

// The values of `tokenizer.ggml.token_type`.
enum class TokenType : int32_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

enum class VocabModel { kSpm, kBpe };

// llama.cpp's values for keys a file leaves out. A default id beyond the vocab means "none".
struct VocabDefaults {
  TokenId bos = kNoToken;
  TokenId eos = kNoToken;
  TokenId unk = kNoToken;
  bool add_bos = false;
  bool add_eos = false;
  bool add_space_prefix = false;  // read from tokenizer.ggml.add_space_prefix only for SPM
};

struct TokenData {
  std::string text;
  float score = 0.0f;
  TokenType type = TokenType::kNormal;
};

class Vocab {
 public:
  // Reads the token table for `model`; errors name the offending key.
  static Vocab from_metadata(const gguf::Metadata& md, VocabModel model, const VocabDefaults& defaults);

  // The text index points into tokens_, so a Vocab may move but not copy.
  Vocab(Vocab&&) noexcept = default;
  Vocab& operator=(Vocab&&) noexcept = default;
  Vocab(const Vocab&) = delete;
  Vocab& operator=(const Vocab&) = delete;

  VocabModel model() const { return model_; }
  int32_t size() const { return static_cast<int32_t>(tokens_.size()); }
  bool contains(TokenId id) const { return id >= 0 && id < size(); }
  const TokenData& token(TokenId id) const;  // throws Error when out of range
  TokenType type(TokenId id) const { return token(id).type; }
  std::optional<TokenId> find(std::string_view text) const;

  TokenId bos() const { return bos_; }  // kNoToken when the vocab has none
  TokenId eos() const { return eos_; }
  TokenId unk() const { return unk_; }
  TokenId sep() const { return sep_; }
  TokenId pad() const { return pad_; }
  TokenId eot() const { return eot_; }
  TokenId eom() const { return eom_; }
  bool add_bos() const { return add_bos_; }
  bool add_eos() const { return add_eos_; }
  bool add_space_prefix() const { return add_space_prefix_; }
  bool is_eog(TokenId id) const { return eog_.count(id) != 0; }
  const std::unordered_set<TokenId>& eog_ids() const { return eog_; }

  // Control, user-defined and unknown tokens: the ones matched verbatim in text before normal tokenization.
  // Longest text first (ties by id), the order llama.cpp tries them in.
  const std::vector<TokenId>& special_tokens() const { return special_tokens_; }

 private:
  Vocab() = default;
  void read_tokens(const gguf::Metadata& md);
  void read_special_ids(const gguf::Metadata& md, const VocabDefaults& defaults);
  void detect_end_of_generation(const gguf::Metadata& md);

  VocabModel model_ = VocabModel::kSpm;
  std::vector<TokenData> tokens_;
  std::unordered_map<std::string_view, TokenId> by_text_;
  TokenId bos_ = kNoToken;
  TokenId eos_ = kNoToken;
  TokenId unk_ = kNoToken;
  TokenId sep_ = kNoToken;
  TokenId pad_ = kNoToken;
  TokenId eot_ = kNoToken;
  TokenId eom_ = kNoToken;
  bool add_bos_ = false;
  bool add_eos_ = false;
  bool add_space_prefix_ = false;
  std::unordered_set<TokenId> eog_;
  std::vector<TokenId> special_tokens_;
};

std::string_view token_type_name(TokenType type);

}  // namespace tessera
