// UTF-8 helpers for the tokenizers: sequence lengths, encoding and decoding code points,
// and a buffer that releases only complete sequences (for printing tokens as they stream out).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace tessera {

// Length of the sequence a lead byte announces (1..4). Continuation and invalid bytes count as 1 so that
// byte-oriented loops always advance.
size_t utf8_sequence_length(uint8_t lead);

void append_utf8(std::string& out, uint32_t code_point);

struct DecodedCodePoint {
  uint32_t code_point = 0;
  size_t length = 0;  // bytes consumed (>= 1 unless the input is empty)
  bool valid = false;
};
// Decodes the code point at `pos`. An invalid or truncated sequence consumes one byte and is flagged invalid.
DecodedCodePoint decode_utf8(std::string_view text, size_t pos);

// Length of the longest prefix of `bytes` that does not end inside an unfinished (but so far valid)
// multi-byte sequence. Invalid bytes never wait: they cannot become valid by appending more bytes.
size_t utf8_complete_prefix(std::string_view bytes);

// Accumulates bytes and hands out text that ends on a UTF-8 sequence boundary.
class Utf8StreamBuffer {
 public:
  // Appends `bytes` and returns everything that is now complete.
  std::string push(std::string_view bytes);
  // Returns whatever is still held (an unfinished sequence), emptying the buffer.
  std::string flush();
  bool empty() const { return pending_.empty(); }

 private:
  std::string pending_;
};

}  // namespace tessera
