// UTF-8 sequence handling shared by the SPM/BPE tokenizers and the streaming decoder.
#include "tokenizer/utf8.h"

namespace tessera {

namespace {

bool is_continuation(uint8_t b) { return (b & 0xC0) == 0x80; }

}  // namespace

size_t utf8_sequence_length(uint8_t lead) {
  if (lead < 0x80) return 1;
  if ((lead & 0xE0) == 0xC0) return 2;
  if ((lead & 0xF0) == 0xE0) return 3;
  if ((lead & 0xF8) == 0xF0) return 4;
  return 1;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

DecodedCodePoint decode_utf8(std::string_view text, size_t pos) {
  if (pos >= text.size()) return {};
  const auto lead = static_cast<uint8_t>(text[pos]);
  const size_t len = utf8_sequence_length(lead);
  if (len == 1) return {lead, 1, lead < 0x80};
  if (pos + len > text.size()) return {lead, 1, false};
  uint32_t cp = lead & (0x7F >> len);
  for (size_t i = 1; i < len; ++i) {
    const auto b = static_cast<uint8_t>(text[pos + i]);
    if (!is_continuation(b)) return {lead, 1, false};
    cp = (cp << 6) | (b & 0x3F);
  }
  // Overlong forms, surrogates and values past U+10FFFF are not valid UTF-8.
  static constexpr uint32_t kMinForLength[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMinForLength[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return {lead, 1, false};
  return {cp, len, true};
}

size_t utf8_complete_prefix(std::string_view bytes) {
  // Only the last 3 bytes can belong to an unfinished sequence.
  const size_t n = bytes.size();
  const size_t lookback = n < 3 ? n : 3;
  for (size_t back = 1; back <= lookback; ++back) {
    const auto b = static_cast<uint8_t>(bytes[n - back]);
    if (is_continuation(b)) continue;
    const size_t len = utf8_sequence_length(b);
    // A lead byte whose sequence runs past the end is unfinished; anything else is complete or invalid.
    return (len > back) ? n - back : n;
  }
  return n;
}

std::string Utf8StreamBuffer::push(std::string_view bytes) {
  pending_.append(bytes);
  const size_t ready = utf8_complete_prefix(pending_);
  std::string out = pending_.substr(0, ready);
  pending_.erase(0, ready);
  return out;
}

std::string Utf8StreamBuffer::flush() {
  std::string out;
  out.swap(pending_);
  return out;
}

}  // namespace tessera
