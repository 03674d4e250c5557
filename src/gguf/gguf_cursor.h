// Internal to the GGUF reader: a bounds-checked little-endian byte cursor and overflow-checked arithmetic.
#pragma once

#include <fmt/format.h>

#include <bit>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "util/error.h"

namespace tessera::gguf::detail {

static_assert(std::endian::native == std::endian::little, "the GGUF reader assumes a little-endian host");

// Overflow-checked unsigned arithmetic: false when the result does not fit.
inline bool checked_add(uint64_t a, uint64_t b, uint64_t& out) { return !__builtin_add_overflow(a, b, &out); }
inline bool checked_mul(uint64_t a, uint64_t b, uint64_t& out) { return !__builtin_mul_overflow(a, b, &out); }
// Rounds x up to a multiple of the power of two `align`; false on overflow.
inline bool checked_align_up(uint64_t x, uint64_t align, uint64_t& out) {
  if (!checked_add(x, align - 1, out)) return false;
  out &= ~(align - 1);
  return true;
}

class Cursor {
 public:
  Cursor(std::span<const uint8_t> bytes, std::string_view file) : bytes_(bytes), file_(file) {}

  size_t pos() const { return pos_; }
  size_t left() const { return bytes_.size() - pos_; }
  std::string_view file() const { return file_; }

  // What is being read ("key 'general.name'", "tensor 3"), prefixed to error messages.
  void set_context(std::string context) { context_ = std::move(context); }

  // Throws Error "FILE: byte AT: [CONTEXT: ]MESSAGE".
  template <typename... Args>
  [[noreturn]] void fail_at(size_t at, fmt::format_string<Args...> format, Args&&... args) const {
    std::string msg = fmt::format(format, std::forward<Args>(args)...);
    if (context_.empty()) fail("{}: byte {}: {}", file_, at, msg);
    fail("{}: byte {}: {}: {}", file_, at, context_, msg);
  }

  void need(size_t n, std::string_view what) const {
    if (n > left()) fail_at(pos_, "unexpected end of file reading {} ({} bytes needed, {} left)", what, n, left());
  }

  template <typename T>
  T read(std::string_view what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }

  // A GGUF string (u64 length + bytes, no terminator). The view points into the input bytes.
  std::string_view read_string(std::string_view what, uint64_t max_len) {
    size_t at = pos_;
    auto len = read<uint64_t>(what);
    if (len > max_len) fail_at(at, "{} length {} exceeds the limit of {}", what, len, max_len);
    if (len > left()) fail_at(at, "{} length {} runs past the end of the file ({} bytes left)", what, len, left());
    std::string_view s(reinterpret_cast<const char*>(bytes_.data() + pos_), static_cast<size_t>(len));
    pos_ += static_cast<size_t>(len);
    return s;
  }

 private:
  std::span<const uint8_t> bytes_;
  std::string_view file_;
  std::string context_;
  size_t pos_ = 0;
};

}  // namespace tessera::gguf::detail
