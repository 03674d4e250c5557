// Cluster keys: generation, the key file's mode and format, refusals of unsafe or malformed files, `tessera keygen`.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>

#include "net/keys.h"
#include "support/test_paths.h"
#include "util/error.h"

namespace tessera::net {
namespace {

unsigned mode_of(const std::filesystem::path& p) {
  struct stat st;
  EXPECT_EQ(::stat(p.c_str(), &st), 0);
  return st.st_mode & 07777;
}

void write_text(const std::filesystem::path& p, const std::string& text, unsigned mode) {
  std::ofstream(p) << text;
  ::chmod(p.c_str(), mode);
}

std::string error_of(const std::filesystem::path& p) {
  try {
    load_cluster_key(p.string());
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(ClusterKeys, GenerateWriteLoad) {
  test::TempDir dir;
  const auto path = dir / "cluster.key";
  const ClusterKey key = ClusterKey::generate();
  EXPECT_NE(key.bytes(), ClusterKey::generate().bytes());
  write_cluster_key(path.string(), key, false);
  EXPECT_EQ(mode_of(path), 0600u);
  const ClusterKey loaded = load_cluster_key(path.string());
  EXPECT_EQ(loaded.bytes(), key.bytes());
  EXPECT_EQ(loaded.fingerprint(), key.fingerprint());
  EXPECT_EQ(key.fingerprint().size(), 16u);
  // The file is a comment and 64 hex digits.
  std::ifstream in(path);
  std::string comment, hex;
  std::getline(in, comment);
  std::getline(in, hex);
  EXPECT_EQ(comment[0], '#');
  EXPECT_EQ(hex.size(), 64u);
  // Subkeys differ by purpose and are not the key itself.
  EXPECT_NE(key.derive("a"), key.derive("b"));
  EXPECT_NE(key.derive("a"), key.bytes());
}

TEST(ClusterKeys, RefusesToOverwriteWithoutForce) {
  test::TempDir dir;
  const auto path = dir / "cluster.key";
  const ClusterKey first = ClusterKey::generate();
  write_cluster_key(path.string(), first, false);
  try {
    write_cluster_key(path.string(), ClusterKey::generate(), false);
    ADD_FAILURE() << "overwrote without force";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("already exists"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("--force"), std::string::npos) << e.what();
  }
  EXPECT_EQ(load_cluster_key(path.string()).bytes(), first.bytes());
  // Forcing over a file that had become world-readable leaves it 0600.
  ::chmod(path.c_str(), 0644);
  const ClusterKey second = ClusterKey::generate();
  write_cluster_key(path.string(), second, true);
  EXPECT_EQ(mode_of(path), 0600u);
  EXPECT_EQ(load_cluster_key(path.string()).bytes(), second.bytes());
}

TEST(ClusterKeys, RefusesFilesOthersCanRead) {
  test::TempDir dir;
  const auto path = dir / "cluster.key";
  write_cluster_key(path.string(), ClusterKey::generate(), false);
  for (unsigned mode : {0644u, 0640u, 0604u, 0620u}) {
    ::chmod(path.c_str(), mode);
    const std::string e = error_of(path);
    EXPECT_NE(e.find(path.string()), std::string::npos) << e;
    EXPECT_NE(e.find(fmt::format("{:04o}", mode)), std::string::npos) << e;
    EXPECT_NE(e.find("chmod 600 " + path.string()), std::string::npos) << e;
  }
  ::chmod(path.c_str(), 0400);  // owner-only read is fine
  EXPECT_EQ(error_of(path), "");
}

TEST(ClusterKeys, RefusesMalformedFiles) {
  test::TempDir dir;
  const auto path = dir / "bad.key";
  const std::string hex64(64, 'a');
  write_text(path, "# only a comment\n", 0600);
  EXPECT_NE(error_of(path).find("holds no key"), std::string::npos) << error_of(path);
  write_text(path, "# c\n" + std::string(30, 'b') + "\n", 0600);
  EXPECT_NE(error_of(path).find("wrong length: 30 hex digits, expected 64"), std::string::npos) << error_of(path);
  write_text(path, hex64.substr(0, 63) + "g\n", 0600);
  EXPECT_NE(error_of(path).find("not a hex digit"), std::string::npos) << error_of(path);
  write_text(path, hex64 + "\n" + hex64 + "\n", 0600);
  EXPECT_NE(error_of(path).find("second key"), std::string::npos) << error_of(path);
  EXPECT_NE(error_of(dir / "missing.key").find("cannot read"), std::string::npos);
  write_text(path, "  " + hex64 + "  \n\n", 0600);  // surrounding blanks are fine
  EXPECT_EQ(error_of(path), "");
}

TEST(ClusterKeys, KeygenCommand) {
  test::TempDir dir;
  const auto path = dir / "k";
  auto r = test::run_command({test::tessera_bin().string(), "keygen", "-o", path.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(mode_of(path), 0600u);
  EXPECT_NE(r.err.find("fingerprint"), std::string::npos) << r.err;
  const auto first = load_cluster_key(path.string()).bytes();
  r = test::run_command({test::tessera_bin().string(), "keygen", "-o", path.string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("already exists"), std::string::npos) << r.err;
  EXPECT_EQ(load_cluster_key(path.string()).bytes(), first);
  r = test::run_command({test::tessera_bin().string(), "keygen", "-o", path.string(), "--force"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(load_cluster_key(path.string()).bytes(), first);
}

}  // namespace
}  // namespace tessera::net
