// SPM encoding (score-driven pair merging with byte fallback) and piece rendering.
#include "tokenizer/spm_tokenizer.h"

#include <fmt/format.h>

#include "tokenizer/symbol_merge.h"
#include "tokenizer/utf8.h"
#include "util/error.h"

namespace tessera {

namespace {

constexpr std::string_view kSpaceMark = "\xE2\x96\x81";  // U+2581 LOWER ONE EIGHTH BLOCK, SentencePiece's space

constexpr VocabDefaults kSpmDefaults{
    .bos = 1, .eos = 2, .unk = 0, .add_bos = true, .add_eos = false, .add_space_prefix = true};

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// "<0x0A>" -> 10; -1 if the text is not of that form.
int parse_byte_token(std::string_view text) {
  if (text.size() != 6 || text.substr(0, 3) != "<0x" || text[5] != '>') return -1;
  const int hi = hex_digit(text[3]);
  const int lo = hex_digit(text[4]);
  return (hi < 0 || lo < 0) ? -1 : hi * 16 + lo;
}

void append_escaped(std::string& out, std::string_view text) {
  for (char c : text) {
    if (c == ' ') {
      out += kSpaceMark;
    } else {
      out += c;
    }
  }
}

}  // namespace

SpmTokenizer::SpmTokenizer(const gguf::Metadata& md)
    : Tokenizer(Vocab::from_metadata(md, VocabModel::kSpm, kSpmDefaults)) {
  byte_value_.assign(static_cast<size_t>(vocab_.size()), -1);
  for (TokenId id = 0; id < vocab_.size(); ++id) {
    const TokenData& t = vocab_.token(id);
    if (t.type != TokenType::kByte) continue;
    const int b = parse_byte_token(t.text);
    if (b < 0) fail("token {} '{}' has type byte but is not written <0xXX>", id, t.text);
    byte_value_[id] = static_cast<int16_t>(b);
  }
  for (int b = 0; b < 256; ++b) {
    // Prefer the <0xXX> token; vocabs without byte tokens may still have the byte as a one-character piece.
    std::optional<TokenId> id = vocab_.find(fmt::format("<0x{:02X}>", b));
    if (!id) id = vocab_.find(std::string(1, static_cast<char>(b)));
    byte_fallback_[b] = id.value_or(kNoToken);
  }
}

std::vector<TokenId> SpmTokenizer::encode(std::string_view text, bool add_special, bool parse_special) const {
  std::vector<TokenId> out;
  if (add_special && vocab_.add_bos()) out.push_back(vocab_.bos());
  // SentencePiece sees each run of text as the start of a sentence: it gets the space prefix at the start of
  // the input and after every special token.
  bool after_special = true;
  std::string escaped;
  for (const Fragment& f : split_special(text, parse_special)) {
    if (f.token != kNoToken) {
      out.push_back(f.token);
      after_special = true;
      continue;
    }
    escaped.clear();
    if (vocab_.add_space_prefix() && after_special) escaped += kSpaceMark;
    append_escaped(escaped, f.text);
    encode_escaped(escaped, out);
    after_special = false;
  }
  if (add_special && vocab_.add_eos()) out.push_back(vocab_.eos());
  return out;
}

void SpmTokenizer::encode_escaped(std::string_view text, std::vector<TokenId>& out) const {
  if (text.empty()) return;
  std::vector<MergeSymbol> syms;
  syms.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    // Invalid UTF-8 goes byte by byte, so a stray lead byte cannot swallow the U+2581 after it.
    const DecodedCodePoint cp = decode_utf8(text, pos);
    const size_t len = cp.valid ? cp.length : 1;
    syms.push_back({pos, len, vocab_.find(text.substr(pos, len)).value_or(kNoToken), -1, -1});
    pos += len;
  }
  merge_symbols(syms, [&](const MergeSymbol& l, const MergeSymbol& r) -> std::optional<std::pair<double, TokenId>> {
    const std::optional<TokenId> id = vocab_.find(text.substr(l.start, l.len + r.len));
    if (!id) return std::nullopt;
    return std::pair<double, TokenId>{vocab_.token(*id).score, *id};
  });
  for (int32_t i = 0; i >= 0; i = syms[i].next) {
    const MergeSymbol& s = syms[i];
    if (s.id != kNoToken) {
      out.push_back(s.id);
      continue;
    }
    // Only single characters can lack a token (merges always produce one): spell them byte by byte, or
    // give the unknown token when the vocab cannot.
    bool spellable = true;
    for (size_t k = 0; k < s.len; ++k)
      spellable = spellable && byte_fallback_[static_cast<uint8_t>(text[s.start + k])] != kNoToken;
    if (!spellable) {
      if (vocab_.unk() == kNoToken)
        fail("cannot encode '{}': the vocab has no byte tokens and no unknown token", text.substr(s.start, s.len));
      out.push_back(vocab_.unk());
      continue;
    }
    for (size_t k = 0; k < s.len; ++k) out.push_back(byte_fallback_[static_cast<uint8_t>(text[s.start + k])]);
  }
}

std::string SpmTokenizer::token_to_piece(TokenId id, bool render_special) const {
  const TokenData& t = vocab_.token(id);
  switch (t.type) {
    case TokenType::kControl:
    case TokenType::kUnknown:
      return render_special ? t.text : std::string();
    case TokenType::kUserDefined:
      return t.text;
    case TokenType::kUnused:
      return {};
    case TokenType::kByte:
      return std::string(1, static_cast<char>(byte_value_[id]));
    case TokenType::kNormal:
    case TokenType::kUndefined:
      break;
  }
  std::string piece;
  piece.reserve(t.text.size());
  std::string_view rest = t.text;
  for (size_t pos = rest.find(kSpaceMark); pos != std::string_view::npos; pos = rest.find(kSpaceMark)) {
    piece.append(rest.substr(0, pos));
    piece += ' ';
    rest.remove_prefix(pos + kSpaceMark.size());
  }
  piece.append(rest);
  return piece;
}

}  // namespace tessera
