// Reads and validates the `tokenizer.ggml.*` token table, special token ids and flags, and works out
// which tokens end generation the way llama.cpp does (by key, else by well-known token texts).
#include "tokenizer/vocab.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <limits>

#include "util/error.h"

namespace tessera {

namespace {

constexpr std::string_view kTokensKey = "tokenizer.ggml.tokens";
constexpr std::string_view kScoresKey = "tokenizer.ggml.scores";
constexpr std::string_view kTypesKey = "tokenizer.ggml.token_type";

// Token ids are stored as uint32 with 0xFFFFFFFF meaning "none" (some converters write int32 -1 instead).
// Returns nullopt when the key is absent and kNoToken for the "none" marker.
std::optional<TokenId> read_token_id(const gguf::Metadata& md, std::string_view key, int32_t n_vocab) {
  const gguf::Value* v = md.find(key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_integer()) {
    fail("metadata key '{}' has type {}, expected an integer token id", key, gguf::value_type_name(v->type()));
  }
  const bool is_signed = v->type() == gguf::ValueType::INT8 || v->type() == gguf::ValueType::INT16 ||
                         v->type() == gguf::ValueType::INT32 || v->type() == gguf::ValueType::INT64;
  if (is_signed) {
    const int64_t id = v->to_i64(key);
    if (id == -1) return kNoToken;
    if (id < 0 || id >= n_vocab)
      fail("metadata key '{}' = {} is not a token id (the vocab has {} tokens)", key, id, n_vocab);
    return static_cast<TokenId>(id);
  }
  const uint64_t id = v->to_u64(key);
  if (id == 0xFFFFFFFFull || id == std::numeric_limits<uint64_t>::max()) return kNoToken;
  if (id >= static_cast<uint64_t>(n_vocab)) {
    fail("metadata key '{}' = {} is not a token id (the vocab has {} tokens)", key, id, n_vocab);
  }
  return static_cast<TokenId>(id);
}

const std::vector<gguf::Value>* optional_parallel_array(const gguf::Metadata& md, std::string_view key, size_t n) {
  const gguf::Value* v = md.find(key);
  if (v == nullptr) return nullptr;
  const auto& items = v->to_array(fmt::format("metadata key '{}'", key));
  if (items.size() != n) fail("metadata key '{}' has {} entries but '{}' has {}", key, items.size(), kTokensKey, n);
  return &items;
}

}  // namespace

std::string_view token_type_name(TokenType type) {
  switch (type) {
    case TokenType::kUndefined:
      return "undefined";
    case TokenType::kNormal:
      return "normal";
    case TokenType::kUnknown:
      return "unknown";
    case TokenType::kControl:
      return "control";
    case TokenType::kUserDefined:
      return "user-defined";
    case TokenType::kUnused:
      return "unused";
    case TokenType::kByte:
      return "byte";
  }
  return "invalid";
}

Vocab Vocab::from_metadata(const gguf::Metadata& md, VocabModel model, const VocabDefaults& defaults) {
  Vocab v;
  v.model_ = model;
  v.read_tokens(md);
  v.read_special_ids(md, defaults);
  v.detect_end_of_generation(md);

  for (TokenId id = 0; id < v.size(); ++id) {
    const TokenData& t = v.tokens_[id];
    const bool matched_verbatim =
        t.type == TokenType::kControl || t.type == TokenType::kUserDefined || t.type == TokenType::kUnknown;
    if (matched_verbatim && !t.text.empty()) v.special_tokens_.push_back(id);
  }
  std::stable_sort(v.special_tokens_.begin(), v.special_tokens_.end(),
                   [&](TokenId a, TokenId b) { return v.tokens_[a].text.size() > v.tokens_[b].text.size(); });
  return v;
}

const TokenData& Vocab::token(TokenId id) const {
  if (!contains(id)) fail("token id {} is out of range (the vocab has {} tokens)", id, size());
  return tokens_[id];
}

std::optional<TokenId> Vocab::find(std::string_view text) const {
  auto it = by_text_.find(text);
  if (it == by_text_.end()) return std::nullopt;
  return it->second;
}

void Vocab::read_tokens(const gguf::Metadata& md) {
  const auto& texts = md.get_array(kTokensKey);
  if (texts.empty()) fail("metadata key '{}' is empty", kTokensKey);
  if (texts.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    fail("metadata key '{}' has {} entries, more than token ids can address", kTokensKey, texts.size());
  }
  const size_t n = texts.size();
  const auto* scores = optional_parallel_array(md, kScoresKey, n);
  const auto* types = optional_parallel_array(md, kTypesKey, n);

  tokens_.resize(n);
  for (size_t i = 0; i < n; ++i) {
    TokenData& t = tokens_[i];
    // Formatting an error context per element would dominate load time; format only on failure.
    if (texts[i].type() != gguf::ValueType::STRING) texts[i].to_string(fmt::format("{}[{}]", kTokensKey, i));
    t.text = std::get<std::string>(texts[i].storage());
    if (scores != nullptr) {
      const gguf::Value& s = (*scores)[i];
      t.score = s.type() == gguf::ValueType::FLOAT32
                    ? std::get<float>(s.storage())
                    : static_cast<float>(s.to_f64(fmt::format("{}[{}]", kScoresKey, i)));
    }
    if (types != nullptr) {
      const gguf::Value& ty = (*types)[i];
      const int64_t raw = ty.type() == gguf::ValueType::INT32 ? std::get<int32_t>(ty.storage())
                                                              : ty.to_i64(fmt::format("{}[{}]", kTypesKey, i));
      if (raw < 0 || raw > static_cast<int64_t>(TokenType::kByte)) {
        fail("{}[{}] = {} is not a token type (0..6)", kTypesKey, i, raw);
      }
      t.type = static_cast<TokenType>(raw);
    }
  }
  // Built after the vector is final so the views stay valid. A repeated text maps to its last id, as in llama.cpp;
  // empty texts cannot be looked up.
  by_text_.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    if (!tokens_[i].text.empty()) by_text_[tokens_[i].text] = static_cast<TokenId>(i);
  }
}

void Vocab::read_special_ids(const gguf::Metadata& md, const VocabDefaults& defaults) {
  const int32_t n = size();
  auto fit = [n](TokenId id) { return id < n ? id : kNoToken; };
  bos_ = fit(defaults.bos);
  eos_ = fit(defaults.eos);
  unk_ = fit(defaults.unk);
  add_bos_ = defaults.add_bos;
  add_eos_ = defaults.add_eos;
  add_space_prefix_ = defaults.add_space_prefix;
  auto read = [&](std::string_view key, TokenId& slot) {
    if (auto id = read_token_id(md, key, n)) slot = *id;
  };
  read("tokenizer.ggml.bos_token_id", bos_);
  read("tokenizer.ggml.eos_token_id", eos_);
  read("tokenizer.ggml.unknown_token_id", unk_);
  read("tokenizer.ggml.seperator_token_id", sep_);  // sic: the GGUF key is misspelled
  read("tokenizer.ggml.padding_token_id", pad_);
  read("tokenizer.ggml.eot_token_id", eot_);
  read("tokenizer.ggml.eom_token_id", eom_);

  if (auto b = md.opt_bool("tokenizer.ggml.add_bos_token")) add_bos_ = *b;
  if (auto b = md.opt_bool("tokenizer.ggml.add_eos_token")) add_eos_ = *b;
  // Only SPM prepends a space at encode time; BPE vocabs carry spaces in their pre-tokenizer instead.
  if (model_ == VocabModel::kSpm) {
    if (auto b = md.opt_bool("tokenizer.ggml.add_space_prefix")) add_space_prefix_ = *b;
  }
  if (add_bos_ && bos_ == kNoToken)
    fail("the tokenizer adds a BOS token (tokenizer.ggml.add_bos_token) but has none (tokenizer.ggml.bos_token_id)");
  if (add_eos_ && eos_ == kNoToken)
    fail("the tokenizer adds an EOS token (tokenizer.ggml.add_eos_token) but has none (tokenizer.ggml.eos_token_id)");
}

void Vocab::detect_end_of_generation(const gguf::Metadata& md) {
  // GGUF has no per-token "ends generation" flag, so like llama.cpp we recognise chat-format terminators by text
  // and treat them as control tokens (so they are not printed) even when the converter typed them otherwise.
  static constexpr std::array<std::string_view, 10> kEotTexts = {
      "<|eot_id|>",      "<|im_end|>", "<|end|>", "<end_of_turn>",         "<|endoftext|>",
      "<|end_of_text|>", "<EOT>",      "_<EOT>",  "<｜end▁of▁sentence｜>", "<end_of_utterance>",
  };
  static constexpr std::array<std::string_view, 11> kEogTexts = {
      "<|eot_id|>", "<|im_end|>", "<|end|>",         "<end_of_turn>",      "<|endoftext|>",         "<|eom_id|>",
      "<EOT>",      "_<EOT>",     "<|end_of_text|>", "<end_of_utterance>", "<｜end▁of▁sentence｜>",
  };
  // Fill-in-the-middle padding/repo/file separators also end generation in llama.cpp.
  static constexpr std::array<std::string_view, 9> kFimEogTexts = {
      "<|fim_pad|>", "<fim-pad>", "<fim_pad>",  "<|fim_repo|>", "<|repo_name|>",
      "<fim-repo>",  "<REPO>",    "<reponame>", "<|file_sep|>",
  };
  auto mark_control = [this](TokenId id) { tokens_[id].type = TokenType::kControl; };

  if (eot_ == kNoToken) {
    for (std::string_view text : kEotTexts) {
      if (auto id = find(text)) {
        eot_ = *id;
        mark_control(*id);
        break;
      }
    }
  }
  if (eom_ == kNoToken) {
    if (auto id = find("<|eom_id|>")) eom_ = *id;
  }
  for (std::string_view text : kEogTexts) {
    if (auto id = find(text)) {
      eog_.insert(*id);
      mark_control(*id);
    }
  }
  bool fim_keys = false;
  for (std::string_view key :
       {"tokenizer.ggml.fim_pad_token_id", "tokenizer.ggml.fim_rep_token_id", "tokenizer.ggml.fim_sep_token_id"}) {
    if (auto id = read_token_id(md, key, size())) {
      fim_keys = true;
      if (*id != kNoToken) eog_.insert(*id);
    }
  }
  if (!fim_keys) {
    for (std::string_view text : kFimEogTexts) {
      if (auto id = find(text)) {
        eog_.insert(*id);
        mark_control(*id);
      }
    }
  }
  for (TokenId id : {eos_, eot_, eom_}) {
    if (id != kNoToken) eog_.insert(id);
  }
}

}  // namespace tessera
