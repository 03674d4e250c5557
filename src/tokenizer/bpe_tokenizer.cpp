// Byte-level BPE: merge table from `tokenizer.ggml.merges` (rank = index), word-by-word merging, decoding.
#include "tokenizer/bpe_tokenizer.h"

#include <fmt/format.h>

#include "tokenizer/byte_level.h"
#include "tokenizer/utf8.h"
#include "util/error.h"

namespace tessera {

namespace {

constexpr std::string_view kMergesKey = "tokenizer.ggml.merges";

std::string_view pre_name(const gguf::Metadata& md) {
  const gguf::Value* v = md.find("tokenizer.ggml.pre");
  return v == nullptr ? std::string_view() : std::string_view(v->to_string("metadata key 'tokenizer.ggml.pre'"));
}

VocabDefaults bpe_defaults(const PreTokenizerConfig& config) {
  // llama.cpp's BPE fallback ids are 11/11 (Falcon's <|endoftext|>); most files set them explicitly.
  return VocabDefaults{
      .bos = 11, .eos = 11, .unk = kNoToken, .add_bos = config.add_bos, .add_eos = false, .add_space_prefix = false};
}

}  // namespace

BpeTokenizer::BpeTokenizer(const gguf::Metadata& md) : BpeTokenizer(md, pre_tokenizer_config(pre_name(md))) {}

BpeTokenizer::BpeTokenizer(const gguf::Metadata& md, const PreTokenizerConfig& config)
    : Tokenizer(Vocab::from_metadata(md, VocabModel::kBpe, bpe_defaults(config))), pre_(config) {
  read_merges(md);
}

void BpeTokenizer::read_merges(const gguf::Metadata& md) {
  const auto& merges = md.get_array(kMergesKey);
  merges_.reserve(merges.size());
  std::string joined;
  for (size_t i = 0; i < merges.size(); ++i) {
    if (merges[i].type() != gguf::ValueType::STRING) merges[i].to_string(fmt::format("{}[{}]", kMergesKey, i));
    const std::string& m = std::get<std::string>(merges[i].storage());
    // The separator is the first space after the first byte, so a left side may itself start with a space.
    const size_t sep = m.size() > 1 ? m.find(' ', 1) : std::string::npos;
    if (sep == std::string::npos) fail("{}[{}] = '{}' is not two tokens separated by a space", kMergesKey, i, m);
    const std::string_view left(m.data(), sep);
    const std::string_view right(m.data() + sep + 1, m.size() - sep - 1);
    joined.assign(left);
    joined.append(right);
    const auto l = vocab_.find(left);
    const auto r = vocab_.find(right);
    const auto merged = vocab_.find(joined);
    // A merge whose parts or result are not tokens can never apply to token symbols; skip it.
    if (!l || !r || !merged) continue;
    // A repeated pair keeps its first (best) rank.
    merges_.emplace(pair_key(*l, *r), Merge{static_cast<int32_t>(i), *merged});
  }
}

std::vector<TokenId> BpeTokenizer::encode(std::string_view text, bool add_special, bool parse_special) const {
  std::vector<TokenId> out;
  if (add_special && vocab_.add_bos()) out.push_back(vocab_.bos());
  std::string encoded;
  std::vector<MergeSymbol> syms;
  for (const Fragment& f : split_special(text, parse_special)) {
    if (f.token != kNoToken) {
      out.push_back(f.token);
      continue;
    }
    for (std::string_view word : pre_.split(f.text)) encode_word(word, encoded, syms, out);
  }
  if (add_special && vocab_.add_eos()) out.push_back(vocab_.eos());
  return out;
}

void BpeTokenizer::encode_word(std::string_view word, std::string& encoded, std::vector<MergeSymbol>& syms,
                               std::vector<TokenId>& out) const {
  encoded.clear();
  append_byte_level(encoded, word);
  if (pre_.config().ignore_merges) {
    if (auto id = vocab_.find(encoded)) {
      out.push_back(*id);
      return;
    }
  }
  syms.clear();
  for (size_t pos = 0; pos < encoded.size();) {
    const size_t len = utf8_sequence_length(static_cast<uint8_t>(encoded[pos]));
    syms.push_back({pos, len, vocab_.find(std::string_view(encoded).substr(pos, len)).value_or(kNoToken), -1, -1});
    pos += len;
  }
  merge_symbols(syms, [&](const MergeSymbol& l, const MergeSymbol& r) -> std::optional<std::pair<double, TokenId>> {
    if (l.id == kNoToken || r.id == kNoToken) return std::nullopt;
    auto it = merges_.find(pair_key(l.id, r.id));
    if (it == merges_.end()) return std::nullopt;
    return std::pair<double, TokenId>{-static_cast<double>(it->second.rank), it->second.merged};
  });
  for (int32_t i = 0; !syms.empty() && i >= 0; i = syms[i].next) {
    // A byte-level character missing from the vocab (Falcon and GPT-NeoX lack some bytes that never occur in
    // valid UTF-8) is dropped, as llama.cpp does: their unknown token is EOS, which must not appear mid-prompt.
    if (syms[i].id != kNoToken) out.push_back(syms[i].id);
  }
}

std::string BpeTokenizer::token_to_piece(TokenId id, bool render_special) const {
  const TokenData& t = vocab_.token(id);
  switch (t.type) {
    case TokenType::kControl:
    case TokenType::kUnknown:
      return render_special ? t.text : std::string();
    case TokenType::kUserDefined:
      return t.text;  // converters store user-defined tokens as plain text, not byte-level
    case TokenType::kUnused:
      return {};
    case TokenType::kNormal:
    case TokenType::kUndefined:
    case TokenType::kByte:
      break;
  }
  return decode_byte_level(t.text);
}

}  // namespace tessera
