// The two sides of a message's field descriptions (messages.cpp): Decoder reads and validates each field,
// Encoder applies the same checks before it writes, so a sender cannot emit what a receiver refuses. Private to net.
#pragma once

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_set>
#include <vector>

#include "net/codec.h"
#include "net/messages.h"
#include "util/error.h"

namespace tessera::net::field_io {

inline constexpr uint64_t kMaxByteCount = uint64_t{1}
                                          << 50;  // sizes and offsets: far beyond any model, far from overflow
inline constexpr float kFloatMax = std::numeric_limits<float>::max();

// Each message struct names its wire type.
template <typename M>
inline constexpr MsgType kTypeOf = M::kType;

inline bool valid_enum(Role v) { return v == Role::Head || v == Role::Worker || v == Role::Peer; }
inline bool valid_enum(HelloStatus v) { return static_cast<uint8_t>(v) <= static_cast<uint8_t>(HelloStatus::Refused); }
inline bool valid_enum(ErrorCode v) {
  const auto raw = static_cast<uint16_t>(v);
  return raw >= 1 && raw <= static_cast<uint16_t>(ErrorCode::Internal);
}
inline bool valid_enum(WireType v) { return static_cast<uint8_t>(v) <= static_cast<uint8_t>(WireType::BF16); }
inline bool valid_enum(GgmlType v) { return find_type_traits(static_cast<uint32_t>(v)).has_value(); }

// Reads fields into a message, validating each.
class Decoder {
 public:
  Decoder(std::span<const uint8_t> body, std::string_view message) : r_(body, message) {}

  void u16(Field f, uint16_t& v, uint16_t lo = 0) {
    v = r_.u16(f);
    if (v < lo) bad(f, fmt::format("{} is below the minimum {}", v, lo));
  }
  void u32(Field f, uint32_t& v, uint32_t lo, uint32_t hi) {
    v = r_.u32(f);
    if (v < lo || v > hi) bad(f, fmt::format("{} is outside [{}, {}]", v, lo, hi));
  }
  void u64(Field f, uint64_t& v, uint64_t hi = std::numeric_limits<uint64_t>::max()) {
    v = r_.u64(f);
    if (v > hi) bad(f, fmt::format("{} exceeds the limit {}", v, hi));
  }
  void i32(Field f, int32_t& v, int32_t lo, int32_t hi) { v = r_.i32_in(f, lo, hi); }
  void f32(Field f, float& v, float lo, float hi) { v = r_.f32_in(f, lo, hi); }
  void logprob(Field f, float& v) {
    v = r_.f32(f);
    if (!(v <= 0.0f)) bad(f, fmt::format("{} is not a log-probability (<= 0)", v));
  }
  void boolean(Field f, bool& v) { v = r_.boolean(f); }
  void flag(Field f, uint8_t& v) { v = r_.boolean(f) ? 1 : 0; }
  template <typename E>
  void enumeration(Field f, E& v) {
    using U = std::underlying_type_t<E>;
    U raw;
    r_.raw(f, &raw, sizeof raw);
    v = static_cast<E>(raw);
    if (!valid_enum(v)) bad(f, fmt::format("{} is not a known value", raw));
  }
  void string(Field f, std::string& v, size_t min, size_t max, Charset charset) { v = r_.string(f, min, max, charset); }
  void bytes(Field f, std::vector<uint8_t>& v, size_t min, size_t max) {
    auto b = r_.bytes(f, max);
    if (b.size() < min) bad(f, fmt::format("{} bytes, at least {} needed", b.size(), min));
    v.assign(b.begin(), b.end());
  }
  // A length-prefixed byte field whose length is implied by other fields.
  void bytes_exact(Field f, std::vector<uint8_t>& v, uint64_t n, size_t max) {
    const uint32_t len = r_.u32(f);
    if (len != n) bad(f, fmt::format("{} bytes where the other fields imply {}", len, n));
    if (len > max) bad(f, fmt::format("{} bytes exceed the limit {}", len, max));
    if (len > r_.remaining()) bad(f, fmt::format("{} bytes, but the message has {} left", len, r_.remaining()));
    v.resize(len);
    r_.raw(f, v.data(), len);
  }
  void hash(Field f, Hash128& v) { r_.raw(f, v.data(), v.size()); }
  size_t count(Field f, size_t /*current*/, size_t min, size_t max, size_t min_element_bytes) {
    const size_t n = r_.count(f, max, min_element_bytes);
    if (n < min) bad(f, fmt::format("count {} is below the minimum {}", n, min));
    return n;
  }
  template <typename T>
  void sized(Field /*f*/, std::vector<T>& v, size_t n) {
    v.resize(n);
  }
  template <typename T>
  void optional(Field f, std::optional<T>& v, const auto& fields) {
    bool present = false;
    boolean(f, present);
    if (!present) {
      v.reset();
      return;
    }
    v.emplace();
    fields(*v);
  }
  [[noreturn]] void bad(Field f, const std::string& why) const { r_.bad(f, why); }
  Reader& reader() { return r_; }

 private:
  Reader r_;
};

// Writes a message's fields, applying the same checks the decoder makes.
class Encoder {
 public:
  explicit Encoder(std::string_view message) : message_(message) {}

  void u16(Field f, const uint16_t& v, uint16_t lo = 0) {
    if (v < lo) bad(f, fmt::format("{} is below the minimum {}", v, lo));
    w_.u16(v);
  }
  void u32(Field f, const uint32_t& v, uint32_t lo, uint32_t hi) {
    if (v < lo || v > hi) bad(f, fmt::format("{} is outside [{}, {}]", v, lo, hi));
    w_.u32(v);
  }
  void u64(Field f, const uint64_t& v, uint64_t hi = std::numeric_limits<uint64_t>::max()) {
    if (v > hi) bad(f, fmt::format("{} exceeds the limit {}", v, hi));
    w_.u64(v);
  }
  void i32(Field f, const int32_t& v, int32_t lo, int32_t hi) {
    if (v < lo || v > hi) bad(f, fmt::format("{} is outside [{}, {}]", v, lo, hi));
    w_.i32(v);
  }
  void f32(Field f, const float& v, float lo, float hi) {
    if (!std::isfinite(v)) bad(f, fmt::format("{} is not a finite number", v));
    if (v < lo || v > hi) bad(f, fmt::format("{} is outside [{}, {}]", v, lo, hi));
    w_.f32(v);
  }
  void logprob(Field f, const float& v) {
    if (!(v <= 0.0f)) bad(f, fmt::format("{} is not a log-probability (<= 0)", v));
    w_.f32(v);
  }
  void boolean(Field /*f*/, const bool& v) { w_.boolean(v); }
  void flag(Field f, const uint8_t& v) {
    if (v > 1) bad(f, fmt::format("{} is not a boolean (0 or 1)", v));
    w_.u8(v);
  }
  template <typename E>
  void enumeration(Field f, const E& v) {
    using U = std::underlying_type_t<E>;
    if (!valid_enum(v)) bad(f, fmt::format("{} is not a known value", static_cast<uint64_t>(v)));
    const U raw = static_cast<U>(v);
    w_.put(&raw, sizeof raw);
  }
  void string(Field f, const std::string& v, size_t min, size_t max, Charset charset) {
    if (v.size() > max) bad(f, fmt::format("length {} exceeds the limit {}", v.size(), max));
    if (v.size() < min) bad(f, fmt::format("{} bytes, at least {} needed", v.size(), min));
    if (auto why = check_charset(v, charset)) bad(f, *why);
    w_.string(v);
  }
  void bytes(Field f, const std::vector<uint8_t>& v, size_t min, size_t max) {
    if (v.size() > max) bad(f, fmt::format("length {} exceeds the limit {}", v.size(), max));
    if (v.size() < min) bad(f, fmt::format("{} bytes, at least {} needed", v.size(), min));
    w_.bytes(v);
  }
  void bytes_exact(Field f, const std::vector<uint8_t>& v, uint64_t n, size_t max) {
    if (v.size() != n) bad(f, fmt::format("{} bytes where the other fields imply {}", v.size(), n));
    if (v.size() > max) bad(f, fmt::format("{} bytes exceed the limit {}", v.size(), max));
    w_.bytes(v);
  }
  void hash(Field /*f*/, const Hash128& v) { w_.put(v.data(), v.size()); }
  size_t count(Field f, size_t current, size_t min, size_t max, size_t /*min_element_bytes*/) {
    if (current > max) bad(f, fmt::format("count {} exceeds the limit {}", current, max));
    if (current < min) bad(f, fmt::format("count {} is below the minimum {}", current, min));
    w_.count(current);
    return current;
  }
  template <typename T>
  void sized(Field f, const std::vector<T>& v, size_t n) {
    if (v.size() != n) bad(f, fmt::format("{} entries where {} are needed", v.size(), n));
  }
  template <typename T>
  void optional(Field f, const std::optional<T>& v, const auto& fields) {
    boolean(f, v.has_value());
    if (v) fields(*v);
  }
  [[noreturn]] void bad(Field f, const std::string& why) const {
    fail("bad {} message: {}: {}", message_, f.str(), why);
  }
  Writer& writer() { return w_; }

 private:
  Writer w_;
  std::string_view message_;
};

}  // namespace tessera::net::field_io
