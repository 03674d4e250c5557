// Tokenizer base: the factory, llama.cpp-style special-token partitioning, detokenization and streaming.
#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <array>
#include <unordered_map>

#include "tokenizer/bpe_tokenizer.h"
#include "tokenizer/spm_tokenizer.h"
#include "util/error.h"

namespace tessera {

// Finds special-token occurrences without scanning the text once per special token: vocabs such as
// DeepSeek's carry thousands of user-defined tokens.
struct Tokenizer::SpecialIndex {
  struct Special {
    TokenId id;
    int32_t rank;  // position in Vocab::special_tokens(): lower ranks are tried first
  };
  std::unordered_map<std::string_view, Special> by_text;
  std::array<std::vector<size_t>, 256> lengths_by_first_byte;  // distinct text lengths per first byte
};

std::unique_ptr<Tokenizer> Tokenizer::from_metadata(const gguf::Metadata& md) {
  const std::string& model = md.get_string("tokenizer.ggml.model");
  if (model == "llama") return std::make_unique<SpmTokenizer>(md);
  if (model == "gpt2") return std::make_unique<BpeTokenizer>(md);
  fail("unsupported tokenizer model '{}' (supported: llama, gpt2)", model);
}

Tokenizer::Tokenizer(Vocab vocab) : vocab_(std::move(vocab)), special_index_(std::make_unique<SpecialIndex>()) {
  const auto& specials = vocab_.special_tokens();
  for (size_t rank = 0; rank < specials.size(); ++rank) {
    const TokenId id = specials[rank];
    const std::string& text = vocab_.token(id).text;
    // Two special tokens with the same text: the first in try order wins, as it would in llama.cpp.
    if (!special_index_->by_text.emplace(text, SpecialIndex::Special{id, static_cast<int32_t>(rank)}).second) continue;
    auto& lengths = special_index_->lengths_by_first_byte[static_cast<unsigned char>(text[0])];
    if (std::find(lengths.begin(), lengths.end(), text.size()) == lengths.end()) lengths.push_back(text.size());
  }
}

Tokenizer::~Tokenizer() = default;

std::optional<TokenId> Tokenizer::eot() const {
  if (vocab_.eot() == kNoToken) return std::nullopt;
  return vocab_.eot();
}

bool Tokenizer::is_control(TokenId id) const { return vocab_.contains(id) && vocab_.type(id) == TokenType::kControl; }

std::vector<Tokenizer::Fragment> Tokenizer::split_special(std::string_view text, bool parse_special) const {
  std::vector<Fragment> out;
  if (text.empty()) return out;

  struct Occurrence {
    int32_t rank;
    size_t pos;
    TokenId id;
    size_t len;
  };
  std::vector<Occurrence> found;
  const SpecialIndex& index = *special_index_;
  for (size_t pos = 0; pos < text.size(); ++pos) {
    for (size_t len : index.lengths_by_first_byte[static_cast<unsigned char>(text[pos])]) {
      if (len > text.size() - pos) continue;
      auto it = index.by_text.find(text.substr(pos, len));
      if (it == index.by_text.end()) continue;
      const TokenType type = vocab_.type(it->second.id);
      if (!parse_special && (type == TokenType::kControl || type == TokenType::kUnknown)) continue;
      found.push_back({it->second.rank, pos, it->second.id, len});
    }
  }
  if (found.empty()) {
    out.push_back({text, kNoToken});
    return out;
  }

  // llama.cpp takes special tokens one at a time, longest first, each claiming its leftmost non-overlapping
  // occurrences in text no earlier token claimed. Replaying the occurrences in that order gives the same split.
  std::sort(found.begin(), found.end(), [](const Occurrence& a, const Occurrence& b) {
    return a.rank != b.rank ? a.rank < b.rank : a.pos < b.pos;
  });
  std::vector<bool> claimed(text.size(), false);
  std::vector<const Occurrence*> taken;
  for (const Occurrence& occ : found) {
    const auto first = claimed.begin() + static_cast<std::ptrdiff_t>(occ.pos);
    const auto last = first + static_cast<std::ptrdiff_t>(occ.len);
    if (std::find(first, last, true) != last) continue;
    std::fill(first, last, true);
    taken.push_back(&occ);
  }
  std::sort(taken.begin(), taken.end(), [](const Occurrence* a, const Occurrence* b) { return a->pos < b->pos; });

  size_t done = 0;
  for (const Occurrence* occ : taken) {
    if (occ->pos > done) out.push_back({text.substr(done, occ->pos - done), kNoToken});
    out.push_back({{}, occ->id});
    done = occ->pos + occ->len;
  }
  if (done < text.size()) out.push_back({text.substr(done), kNoToken});
  return out;
}

std::string Tokenizer::decode(std::span<const TokenId> ids, bool render_special) const {
  std::string out;
  bool strip_space = vocab_.add_space_prefix();
  for (TokenId id : ids) {
    std::string piece = token_to_piece(id, render_special);
    // Only the first token may lose the space the encoder prepended, even if it printed nothing (like BOS).
    if (strip_space && !piece.empty() && piece.front() == ' ') piece.erase(0, 1);
    strip_space = false;
    out += piece;
  }
  return out;
}

std::string StreamDecoder::push(TokenId id) { return buffer_.push(tokenizer_->token_to_piece(id, render_special_)); }

}  // namespace tessera
