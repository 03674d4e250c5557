// Bounds-checked little-endian Reader/Writer for wire messages, activation (f32/f16/bf16) conversion and
// tensor content hashes. Every Reader failure is a tessera::Error naming the message type and the field.
#pragma once

#include <array>
#include <bit>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tessera::net {

// The wire format is little-endian and the codec copies numbers with memcpy.
static_assert(std::endian::native == std::endian::little, "Tessera's wire codec assumes a little-endian host");

// A field's name in error messages: "tensors", "tensors[3]" or "tensors[3].name".
struct Field {
  Field(const char* field_name) : name(field_name) {}  // NOLINT: implicit so plain names read naturally
  Field(const char* field_name, int64_t element, const char* member_name = nullptr)
      : name(field_name), index(element), member(member_name) {}
  std::string str() const;

  const char* name;
  int64_t index = -1;
  const char* member = nullptr;
};

// What a text field may hold. Names are identifiers; Text is UTF-8 meant for people (no control characters
// except tab and newline); Printable is visible ASCII and space.
enum class Charset { NodeName, TensorName, FileName, Printable, Text };

class Reader {
 public:
  Reader(std::span<const uint8_t> data, std::string_view message) : data_(data), message_(message) {}

  uint8_t u8(Field f) { return take<uint8_t>(f); }
  uint16_t u16(Field f) { return take<uint16_t>(f); }
  uint32_t u32(Field f) { return take<uint32_t>(f); }
  uint64_t u64(Field f) { return take<uint64_t>(f); }
  int32_t i32(Field f) { return take<int32_t>(f); }
  float f32(Field f) { return take<float>(f); }
  bool boolean(Field f);  // one byte, 0 or 1
  // A finite float in [lo, hi].
  float f32_in(Field f, float lo, float hi);
  // An int32 in [lo, hi].
  int32_t i32_in(Field f, int32_t lo, int32_t hi);
  // A u32 length then that many bytes; the length must not exceed max_bytes nor what is left.
  std::span<const uint8_t> bytes(Field f, size_t max_bytes);
  std::string string(Field f, size_t min_bytes, size_t max_bytes, Charset charset);
  // A u32 element count, checked against `max` and against what is left given each element's smallest size,
  // before anything is allocated for the elements.
  size_t count(Field f, size_t max, size_t min_element_bytes);
  void raw(Field f, void* out, size_t n);

  size_t remaining() const { return data_.size() - pos_; }
  // Trailing bytes are an error: a message has exactly one encoding.
  void finish();
  // Forward compatibility (Hello/HelloAck only): later versions may append fields.
  void skip_rest() { pos_ = data_.size(); }

  [[noreturn]] void bad(Field f, const std::string& why) const;

 private:
  template <typename T>
  T take(Field f) {
    T v;
    raw(f, &v, sizeof v);
    return v;
  }

  std::span<const uint8_t> data_;
  size_t pos_ = 0;
  std::string_view message_;
};

class Writer {
 public:
  void u8(uint8_t v) { put(&v, 1); }
  void u16(uint16_t v) { put(&v, sizeof v); }
  void u32(uint32_t v) { put(&v, sizeof v); }
  void u64(uint64_t v) { put(&v, sizeof v); }
  void i32(int32_t v) { put(&v, sizeof v); }
  void f32(float v) { put(&v, sizeof v); }
  void boolean(bool v) { u8(v ? 1 : 0); }
  void bytes(std::span<const uint8_t> v);  // u32 length + bytes
  void string(std::string_view v);         // u32 length + bytes
  void count(size_t n);                    // u32
  void put(const void* data, size_t n);

  std::vector<uint8_t>& data() { return out_; }
  std::vector<uint8_t> take() { return std::move(out_); }

 private:
  std::vector<uint8_t> out_;
};

// True when `s` is well-formed UTF-8 (no overlong forms, surrogates or code points past U+10FFFF).
bool valid_utf8(std::string_view s);
// `text` made fit for a Text field of at most max_bytes: invalid UTF-8 and control characters (other than tab and
// newline) become '?', and it is cut at a character boundary. For error texts that come from anywhere.
std::string wire_text(std::string_view text, size_t max_bytes);
// Why `s` is not a valid value for the charset, or nullopt when it is.
std::optional<std::string> check_charset(std::string_view s, Charset charset);

// ---- Activations on the wire ----

// Element type of activations and logits on the wire. Numeric values are the wire encoding; never renumber.
enum class WireType : uint8_t { F32 = 0, F16 = 1, BF16 = 2 };

size_t wire_type_size(WireType type);
std::string_view wire_type_name(WireType type);
std::optional<WireType> wire_type_from_name(std::string_view name);  // "f32", "f16", "bf16"

// A row-major [n_rows][n_cols] matrix of activations or logits in `type`.
struct Activations {
  WireType type = WireType::F32;
  uint32_t n_rows = 0;
  uint32_t n_cols = 0;
  std::vector<uint8_t> data;  // n_rows * n_cols * wire_type_size(type) bytes

  bool operator==(const Activations&) const = default;
};

// Converts f32 values (n_rows * n_cols of them) to the wire type (f16/bf16 round to nearest even).
Activations encode_activations(std::span<const float> values, uint32_t n_rows, uint32_t n_cols, WireType type);
// Converts back to f32; `out` must hold n_rows * n_cols values.
void decode_activations(const Activations& a, std::span<float> out);
std::vector<float> decode_activations(const Activations& a);

// ---- Tensor content hashes ----

// XXH3-128 of a tensor's bytes in canonical (big-endian) byte order: it names weights independently of their
// file, so a worker can tell which tensors it already holds.
using Hash128 = std::array<uint8_t, 16>;
Hash128 content_hash(std::span<const uint8_t> bytes);
std::string hash_hex(const Hash128& hash);

// The same hash over bytes that arrive in pieces: digest() equals content_hash of them all, concatenated.
class ContentHasher {
 public:
  ContentHasher();
  ~ContentHasher();
  ContentHasher(const ContentHasher&) = delete;
  ContentHasher& operator=(const ContentHasher&) = delete;
  void update(std::span<const uint8_t> bytes);
  Hash128 digest() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace tessera::net
