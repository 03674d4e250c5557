// Cluster key generation (OpenSSL's CSPRNG), subkey derivation (HMAC-SHA256) and the key file format.
#include "net/keys.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "util/error.h"

namespace tessera::net {
namespace {

constexpr std::string_view kHeader =
    "# Tessera cluster key: every node of the cluster needs this same file. Keep it secret (mode 0600).\n";

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string trim(const std::string& s) {
  const auto begin = s.find_first_not_of(" \t\r");
  if (begin == std::string::npos) return "";
  const auto end = s.find_last_not_of(" \t\r");
  return s.substr(begin, end - begin + 1);
}

// Closes a descriptor on every path out of write_cluster_key.
class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  ~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  int get() const { return fd_; }
  int release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_;
};

}  // namespace

ClusterKey::~ClusterKey() { OPENSSL_cleanse(bytes_.data(), bytes_.size()); }

ClusterKey ClusterKey::generate() {
  std::array<uint8_t, kBytes> bytes;
  if (RAND_priv_bytes(bytes.data(), static_cast<int>(bytes.size())) != 1) {
    fail("cannot generate a cluster key: the system's random number generator failed");
  }
  ClusterKey key(bytes);
  OPENSSL_cleanse(bytes.data(), bytes.size());
  return key;
}

std::array<uint8_t, 32> ClusterKey::derive(std::string_view label) const {
  std::array<uint8_t, 32> out;
  size_t out_len = 0;
  if (EVP_Q_mac(nullptr, "HMAC", nullptr, "SHA256", nullptr, bytes_.data(), bytes_.size(),
                reinterpret_cast<const unsigned char*>(label.data()), label.size(), out.data(), out.size(),
                &out_len) == nullptr ||
      out_len != out.size()) {
    fail("cannot derive a key from the cluster key (HMAC-SHA256 failed)");
  }
  return out;
}

std::string ClusterKey::fingerprint() const {
  const auto digest = derive("tessera cluster key v1: fingerprint");
  std::string s;
  for (size_t i = 0; i < 8; ++i) s += fmt::format("{:02x}", digest[i]);
  return s;
}

void write_cluster_key(const std::string& path, const ClusterKey& key, bool overwrite) {
  int flags = O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW;
  flags |= overwrite ? O_TRUNC : O_EXCL;
  FileDescriptor fd(::open(path.c_str(), flags, 0600));
  if (fd.get() < 0) {
    if (errno == EEXIST)
      fail("{} already exists; pass --force to replace it (nodes using the old key stop working)", path);
    fail("cannot write {}: {}", path, std::strerror(errno));
  }
  // An existing file keeps its mode through O_TRUNC; a key file must never be readable by others.
  if (::fchmod(fd.get(), 0600) != 0) fail("cannot set the mode of {} to 0600: {}", path, std::strerror(errno));
  std::string text(kHeader);
  for (uint8_t b : key.bytes()) text += fmt::format("{:02x}", b);
  text += '\n';
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd.get(), text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail("cannot write {}: {}", path, std::strerror(errno));
    done += static_cast<size_t>(n);
  }
  OPENSSL_cleanse(text.data(), text.size());
  if (::close(fd.release()) != 0) fail("cannot write {}: {}", path, std::strerror(errno));
}

ClusterKey load_cluster_key(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) fail("cannot read the cluster key {}: {}", path, std::strerror(errno));
  if (!S_ISREG(st.st_mode)) fail("cluster key {} is not a regular file", path);
  const unsigned mode = st.st_mode & 07777;
  if ((mode & 077) != 0) {
    fail("cluster key {} has mode {:04o}: group or others may {} it; run: chmod 600 {}", path, mode,
         (mode & 022) != 0 ? "read or write" : "read", path);
  }
  std::ifstream in(path);
  if (!in) fail("cannot read the cluster key {}", path);
  std::string line;
  std::string key_line;
  int line_no = 0;
  int key_line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line_no > 100 || line.size() > 1000) fail("cluster key {} is not a key file (too long)", path);
    const std::string t = trim(line);
    if (t.empty() || t[0] == '#') continue;
    if (!key_line.empty())
      fail("cluster key {}: a second key on line {} (line {} has one already)", path, line_no, key_line_no);
    key_line = t;
    key_line_no = line_no;
  }
  if (key_line.empty()) fail("cluster key {} holds no key (expected a line of 64 hex digits)", path);
  for (size_t i = 0; i < key_line.size(); ++i) {
    if (hex_value(key_line[i]) < 0) {
      fail("cluster key {}, line {}: '{}' at column {} is not a hex digit", path, key_line_no, key_line[i], i + 1);
    }
  }
  if (key_line.size() != 2 * ClusterKey::kBytes) {
    fail("cluster key {} has the wrong length: {} hex digits, expected {} ({} bytes)", path, key_line.size(),
         2 * ClusterKey::kBytes, ClusterKey::kBytes);
  }
  std::array<uint8_t, ClusterKey::kBytes> bytes;
  for (size_t i = 0; i < bytes.size(); ++i) {
    bytes[i] = static_cast<uint8_t>(hex_value(key_line[2 * i]) * 16 + hex_value(key_line[2 * i + 1]));
  }
  OPENSSL_cleanse(key_line.data(), key_line.size());
  ClusterKey key(bytes);
  OPENSSL_cleanse(bytes.data(), bytes.size());
  return key;
}

}  // namespace tessera::net
