// Test helper: writes GGUF fields byte by byte, so tests can build files the writer would refuse to make.
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

namespace tessera::test {

class RawGguf {
 public:
  template <typename T>
  RawGguf& put(T v) {
    size_t at = bytes_.size();
    bytes_.resize(at + sizeof v);
    std::memcpy(bytes_.data() + at, &v, sizeof v);
    return *this;
  }
  RawGguf& u8(uint8_t v) { return put(v); }
  RawGguf& u32(uint32_t v) { return put(v); }
  RawGguf& u64(uint64_t v) { return put(v); }
  RawGguf& str(std::string_view s) {
    u64(s.size());
    bytes_.insert(bytes_.end(), s.begin(), s.end());
    return *this;
  }
  RawGguf& header(uint64_t n_tensors, uint64_t n_kv, uint32_t version = 3) {
    bytes_.insert(bytes_.end(), {'G', 'G', 'U', 'F'});
    return u32(version).u64(n_tensors).u64(n_kv);
  }
  // A key and its value type; the caller appends the value.
  RawGguf& key(std::string_view k, uint32_t type) { return str(k).u32(type); }
  RawGguf& kv_u32(std::string_view k, uint32_t v) { return key(k, 4).u32(v); }
  RawGguf& kv_string(std::string_view k, std::string_view v) { return key(k, 8).str(v); }
  RawGguf& tensor(std::string_view name, const std::vector<uint64_t>& ne, uint32_t type, uint64_t offset) {
    str(name).u32(static_cast<uint32_t>(ne.size()));
    for (uint64_t n : ne) u64(n);
    return u32(type).u64(offset);
  }
  RawGguf& pad_to(size_t alignment) {
    while (bytes_.size() % alignment != 0) bytes_.push_back(0);
    return *this;
  }
  RawGguf& zeros(size_t n) {
    bytes_.resize(bytes_.size() + n, 0);
    return *this;
  }
  size_t size() const { return bytes_.size(); }
  const std::vector<uint8_t>& bytes() const { return bytes_; }

 private:
  std::vector<uint8_t> bytes_;
};

}  // namespace tessera::test
