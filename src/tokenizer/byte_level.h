// GPT-2's byte-level alphabet: every byte maps to a printable code point so that BPE vocabularies
// can store arbitrary bytes as text (space -> U+0120 'Ġ', newline -> U+010A 'Ċ', ...).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tessera {

uint32_t byte_to_code_point(uint8_t byte);
std::optional<uint8_t> code_point_to_byte(uint32_t code_point);

// Appends the byte-level spelling of `bytes` (the form BPE merges and vocab entries use).
void append_byte_level(std::string& out, std::string_view bytes);
// The bytes a byte-level string stands for. Code points outside the alphabet (vocab entries that were never
// byte-level encoded) are kept as their own UTF-8, and invalid UTF-8 is copied through unchanged.
std::string decode_byte_level(std::string_view text);

}  // namespace tessera
