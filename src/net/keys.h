// The cluster key: 32 random bytes that every node of a cluster shares; links authenticate and encrypt with
// keys derived from it. Stored as a text file (a comment line and 64 hex digits) that only its owner may read.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace tessera::net {

class ClusterKey {
 public:
  static constexpr size_t kBytes = 32;

  explicit ClusterKey(const std::array<uint8_t, kBytes>& bytes) : bytes_(bytes) {}
  ClusterKey(const ClusterKey&) = default;
  ClusterKey& operator=(const ClusterKey&) = default;
  ~ClusterKey();  // wipes the bytes

  // A fresh key from the operating system's CSPRNG.
  static ClusterKey generate();

  const std::array<uint8_t, kBytes>& bytes() const { return bytes_; }
  // A 32-byte subkey for one purpose (HMAC-SHA256 of the label under the key): distinct labels give independent
  // keys, so the TLS secret is never the stored key itself.
  std::array<uint8_t, 32> derive(std::string_view label) const;
  // 16 hex digits that identify the key without revealing it: compare them across nodes.
  std::string fingerprint() const;

 private:
  std::array<uint8_t, kBytes> bytes_;
};

// Writes a new key file with mode 0600. Refuses an existing file unless `overwrite`.
void write_cluster_key(const std::string& path, const ClusterKey& key, bool overwrite);

// Reads a key file. Refuses a file that group or others may read or write (naming its mode and the chmod that
// fixes it), a file without exactly one key line, and a key that is not 64 hex digits.
ClusterKey load_cluster_key(const std::string& path);

}  // namespace tessera::net
