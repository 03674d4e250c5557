// Where tests find shared test data, the source tree, the built tessera binary and scratch space.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace tessera::test {

std::filesystem::path shared_dir();   // ../shared beside the checkout (read-only)
std::filesystem::path source_dir();   // the project root
std::filesystem::path tessera_bin();  // the built `tessera` executable
// A fresh empty directory for this test, removed when the returned object is destroyed.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

std::vector<uint8_t> read_file(const std::filesystem::path& path);
// A file of native-endian floats (--logits-out, the quant fixtures' values), whole.
std::vector<float> read_floats(const std::filesystem::path& path);
// A program from PATH as a full path (run_command does not search PATH); a failed test when it is not there
// (scripts/setup.sh installs what the tests start), never a pass.
std::string on_path(const std::string& program);
void write_file(const std::filesystem::path& path, const std::vector<uint8_t>& bytes);

struct CommandResult {
  int exit_code = -1;
  std::string out;  // standard output
  std::string err;  // standard error
};
// Runs argv (no shell) and captures both streams.
CommandResult run_command(const std::vector<std::string>& argv);
// Runs the built `tessera` binary with `args`.
CommandResult tessera(std::vector<std::string> args);

}  // namespace tessera::test
