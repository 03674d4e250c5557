// GPT-2 byte <-> code point tables, built once on first use.
#include "tokenizer/byte_level.h"

#include <array>

#include "tokenizer/utf8.h"

namespace tessera {

namespace {

struct ByteLevelTables {
  std::array<uint32_t, 256> to_cp{};
  std::array<std::string, 256> to_utf8;
  // Every mapped code point is below 0x144 (256 + 68 remapped bytes).
  std::array<int16_t, 0x144> to_byte{};
};

const ByteLevelTables& tables() {
  static const ByteLevelTables t = [] {
    ByteLevelTables r;
    r.to_byte.fill(-1);
    // Printable Latin-1 bytes keep their own code point; the rest are moved past 255 in byte order.
    auto keeps_itself = [](int b) { return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE); };
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const uint32_t cp = keeps_itself(b) ? static_cast<uint32_t>(b) : next++;
      r.to_cp[b] = cp;
      append_utf8(r.to_utf8[b], cp);
      r.to_byte[cp] = static_cast<int16_t>(b);
    }
    return r;
  }();
  return t;
}

}  // namespace

uint32_t byte_to_code_point(uint8_t byte) { return tables().to_cp[byte]; }

std::optional<uint8_t> code_point_to_byte(uint32_t code_point) {
  const auto& t = tables();
  if (code_point >= t.to_byte.size() || t.to_byte[code_point] < 0) return std::nullopt;
  return static_cast<uint8_t>(t.to_byte[code_point]);
}

void append_byte_level(std::string& out, std::string_view bytes) {
  const auto& t = tables();
  for (char c : bytes) out += t.to_utf8[static_cast<uint8_t>(c)];
}

std::string decode_byte_level(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t pos = 0;
  while (pos < text.size()) {
    const DecodedCodePoint d = decode_utf8(text, pos);
    if (d.valid) {
      if (auto b = code_point_to_byte(d.code_point)) {
        out.push_back(static_cast<char>(*b));
      } else {
        out.append(text.substr(pos, d.length));
      }
    } else {
      out.push_back(text[pos]);
    }
    pos += d.length;
  }
  return out;
}

}  // namespace tessera
