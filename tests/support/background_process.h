// Test helper: a `tessera` command (a head) running in the background with its output in a file, for tests that
// disturb it while it runs (a worker killed or stopped mid-step) and then read what it said.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "support/test_paths.h"

namespace tessera::test {

// A head running in the background with its output in a file.
class Background {
 public:
  static int& counter() {
    static int n = 0;
    return n;
  }
  // `out`: a file for its standard output alone (the text a run prints); empty: with its log in output().
  explicit Background(std::vector<std::string> args, const std::filesystem::path& out = {}) {
    args.insert(args.begin(), test::tessera_bin().string());
    log_ = std::filesystem::temp_directory_path() /
           ("tessera-bg-" + std::to_string(::getpid()) + "-" + std::to_string(counter()++) + ".log");
    pid_ = fork();
    if (pid_ == 0) {
      FILE* f = std::fopen(log_.c_str(), "w");
      dup2(fileno(f), 1);
      dup2(fileno(f), 2);
      if (!out.empty()) {
        FILE* o = std::fopen(out.c_str(), "w");
        if (o != nullptr) dup2(fileno(o), 1);
      }
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
  }
  ~Background() {
    if (pid_ > 0 && !done_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    std::filesystem::remove(log_);
  }
  int wait_exit(std::chrono::seconds limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < deadline) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        done_ = true;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return -1;
  }
  std::string output() const {
    std::ifstream in(log_);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }
  // Waits until the output holds `text`.
  bool wait_for(const std::string& text, std::chrono::seconds limit) const {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < deadline) {
      if (output().find(text) != std::string::npos) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }

 private:
  pid_t pid_ = -1;
  bool done_ = false;
  std::filesystem::path log_;
};

}  // namespace tessera::test
