// Bounds-checked wire Reader/Writer, text validation, activation conversion and tensor content hashes.
#include "net/codec.h"

#include <fmt/format.h>
#include <xxhash.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "tensor/fp16.h"
#include "util/error.h"

namespace tessera::net {

std::string Field::str() const {
  if (index < 0) return member == nullptr ? std::string(name) : fmt::format("{}.{}", name, member);
  if (member == nullptr) return fmt::format("{}[{}]", name, index);
  return fmt::format("{}[{}].{}", name, index, member);
}

void Reader::bad(Field f, const std::string& why) const { fail("bad {} message: {}: {}", message_, f.str(), why); }

void Reader::raw(Field f, void* out, size_t n) {
  if (n > remaining()) {
    fail("truncated {} message: {}: needs {} bytes at offset {}, {} left", message_, f.str(), n, pos_, remaining());
  }
  if (n > 0) std::memcpy(out, data_.data() + pos_, n);
  pos_ += n;
}

bool Reader::boolean(Field f) {
  const uint8_t v = u8(f);
  if (v > 1) bad(f, fmt::format("{} is not a boolean (0 or 1)", v));
  return v == 1;
}

float Reader::f32_in(Field f, float lo, float hi) {
  const float v = f32(f);
  if (!std::isfinite(v)) bad(f, fmt::format("{} is not a finite number", v));
  if (v < lo || v > hi) bad(f, fmt::format("{} is outside [{}, {}]", v, lo, hi));
  return v;
}

int32_t Reader::i32_in(Field f, int32_t lo, int32_t hi) {
  const int32_t v = i32(f);
  if (v < lo || v > hi) bad(f, fmt::format("{} is outside [{}, {}]", v, lo, hi));
  return v;
}

std::span<const uint8_t> Reader::bytes(Field f, size_t max_bytes) {
  const uint32_t n = u32(f);
  if (n > max_bytes) bad(f, fmt::format("length {} exceeds the limit {}", n, max_bytes));
  if (n > remaining()) bad(f, fmt::format("length {} exceeds the {} bytes left in the message", n, remaining()));
  auto out = data_.subspan(pos_, n);
  pos_ += n;
  return out;
}

std::string Reader::string(Field f, size_t min_bytes, size_t max_bytes, Charset charset) {
  const auto b = bytes(f, max_bytes);
  std::string s(reinterpret_cast<const char*>(b.data()), b.size());
  if (s.size() < min_bytes) bad(f, fmt::format("{} bytes, at least {} needed", s.size(), min_bytes));
  if (auto why = check_charset(s, charset)) bad(f, *why);
  return s;
}

size_t Reader::count(Field f, size_t max, size_t min_element_bytes) {
  const uint32_t n = u32(f);
  if (n > max) bad(f, fmt::format("count {} exceeds the limit {}", n, max));
  if (min_element_bytes > 0 && n > remaining() / min_element_bytes) {
    bad(f, fmt::format("count {} needs at least {} bytes but the message has {} left", n,
                       static_cast<uint64_t>(n) * min_element_bytes, remaining()));
  }
  return n;
}

void Reader::finish() {
  if (remaining() != 0) fail("bad {} message: {} unexpected bytes after the last field", message_, remaining());
}

void Writer::put(const void* data, size_t n) {
  if (n == 0) return;
  const auto* p = static_cast<const uint8_t*>(data);
  out_.insert(out_.end(), p, p + n);
}

void Writer::count(size_t n) {
  if (n > std::numeric_limits<uint32_t>::max()) fail("wire encoder: count {} does not fit 32 bits", n);
  u32(static_cast<uint32_t>(n));
}

void Writer::bytes(std::span<const uint8_t> v) {
  count(v.size());
  put(v.data(), v.size());
}

void Writer::string(std::string_view v) {
  count(v.size());
  put(v.data(), v.size());
}

bool valid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<uint8_t>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len;
    uint32_t cp;
    if ((c & 0xe0) == 0xc0) {
      len = 2;
      cp = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
      len = 3;
      cp = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
      len = 4;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (i + len > s.size()) return false;
    for (size_t k = 1; k < len; ++k) {
      const auto cc = static_cast<uint8_t>(s[i + k]);
      if ((cc & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3f);
    }
    static constexpr uint32_t kMinForLength[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMinForLength[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    i += len;
  }
  return true;
}

std::string wire_text(std::string_view text, size_t max_bytes) {
  std::string out;
  size_t i = 0;
  while (i < text.size()) {
    const auto c = static_cast<uint8_t>(text[i]);
    size_t len = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 0;
    std::string_view piece = "?";
    if (len == 1) {
      if (c >= 0x20 || c == '\n' || c == '\t') piece = text.substr(i, 1);
      if (c == 0x7f) piece = "?";
    } else if (len > 1 && i + len <= text.size() && valid_utf8(text.substr(i, len))) {
      piece = text.substr(i, len);
    } else {
      len = 1;
    }
    if (out.size() + piece.size() > max_bytes) break;
    out += piece;
    i += len;
  }
  return out;
}

std::optional<std::string> check_charset(std::string_view s, Charset charset) {
  auto byte_at = [&](size_t i) { return static_cast<uint8_t>(s[i]); };
  for (size_t i = 0; i < s.size(); ++i) {
    const uint8_t c = byte_at(i);
    bool ok = true;
    switch (charset) {
      case Charset::NodeName:
        ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
             c == '-';
        break;
      case Charset::TensorName:
        ok = c > 0x20 && c < 0x7f;
        break;
      case Charset::Printable:
        ok = c >= 0x20 && c < 0x7f;
        break;
      case Charset::FileName:
        ok = c >= 0x20 && c != 0x7f && c != '/';
        break;
      case Charset::Text:
        ok = c >= 0x20 || c == '\n' || c == '\t';
        ok = ok && c != 0x7f;
        break;
    }
    if (!ok) return fmt::format("byte {} (0x{:02x}) is not allowed here", i, c);
  }
  if ((charset == Charset::FileName || charset == Charset::Text) && !valid_utf8(s)) return "not valid UTF-8";
  if (charset == Charset::FileName && (s == "." || s == "..")) return fmt::format("'{}' is not a file name", s);
  return std::nullopt;
}

size_t wire_type_size(WireType type) {
  switch (type) {
    case WireType::F32:
      return 4;
    case WireType::F16:
    case WireType::BF16:
      return 2;
  }
  fail("unknown wire type {}", static_cast<int>(type));
}

std::string_view wire_type_name(WireType type) {
  switch (type) {
    case WireType::F32:
      return "f32";
    case WireType::F16:
      return "f16";
    case WireType::BF16:
      return "bf16";
  }
  return "?";
}

std::optional<WireType> wire_type_from_name(std::string_view name) {
  if (name == "f32") return WireType::F32;
  if (name == "f16") return WireType::F16;
  if (name == "bf16") return WireType::BF16;
  return std::nullopt;
}

Activations encode_activations(std::span<const float> values, uint32_t n_rows, uint32_t n_cols, WireType type) {
  const uint64_t n = static_cast<uint64_t>(n_rows) * n_cols;
  if (values.size() != n) fail("encode_activations: {} values for a {} x {} matrix", values.size(), n_rows, n_cols);
  Activations a;
  a.type = type;
  a.n_rows = n_rows;
  a.n_cols = n_cols;
  a.data.resize(n * wire_type_size(type));
  switch (type) {
    case WireType::F32:
      if (n > 0) std::memcpy(a.data.data(), values.data(), a.data.size());
      break;
    case WireType::F16:
    case WireType::BF16:
      for (size_t i = 0; i < n; ++i) {
        const uint16_t h = type == WireType::F16 ? fp32_to_fp16(values[i]) : fp32_to_bf16(values[i]);
        std::memcpy(a.data.data() + 2 * i, &h, 2);
      }
      break;
  }
  return a;
}

void decode_activations(const Activations& a, std::span<float> out) {
  const uint64_t n = static_cast<uint64_t>(a.n_rows) * a.n_cols;
  if (a.data.size() != n * wire_type_size(a.type)) {
    fail("activations: {} bytes for a {} x {} {} matrix", a.data.size(), a.n_rows, a.n_cols, wire_type_name(a.type));
  }
  if (out.size() != n) fail("decode_activations: room for {} values, the matrix has {}", out.size(), n);
  switch (a.type) {
    case WireType::F32:
      if (n > 0) std::memcpy(out.data(), a.data.data(), a.data.size());
      break;
    case WireType::F16:
    case WireType::BF16:
      for (size_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, a.data.data() + 2 * i, 2);
        out[i] = a.type == WireType::F16 ? fp16_to_fp32(h) : bf16_to_fp32(h);
      }
      break;
  }
}

std::vector<float> decode_activations(const Activations& a) {
  std::vector<float> out(static_cast<size_t>(a.n_rows) * a.n_cols);
  decode_activations(a, out);
  return out;
}

Hash128 content_hash(std::span<const uint8_t> bytes) {
  const XXH128_hash_t h = XXH3_128bits(bytes.data(), bytes.size());
  XXH128_canonical_t canonical;
  XXH128_canonicalFromHash(&canonical, h);
  Hash128 out;
  std::memcpy(out.data(), canonical.digest, out.size());
  return out;
}

struct ContentHasher::State {
  XXH3_state_t* xxh = XXH3_createState();
  ~State() { XXH3_freeState(xxh); }
};

ContentHasher::ContentHasher() : state_(std::make_unique<State>()) {
  if (state_->xxh == nullptr) fail("out of memory for a hash state");
  XXH3_128bits_reset(state_->xxh);
}

ContentHasher::~ContentHasher() = default;

void ContentHasher::update(std::span<const uint8_t> bytes) {
  XXH3_128bits_update(state_->xxh, bytes.data(), bytes.size());
}

Hash128 ContentHasher::digest() const {
  XXH128_canonical_t canonical;
  XXH128_canonicalFromHash(&canonical, XXH3_128bits_digest(state_->xxh));
  Hash128 out;
  std::memcpy(out.data(), canonical.digest, out.size());
  return out;
}

std::string hash_hex(const Hash128& hash) {
  std::string s;
  s.reserve(32);
  for (uint8_t b : hash) s += fmt::format("{:02x}", b);
  return s;
}

}  // namespace tessera::net
