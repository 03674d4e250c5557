// Test helper: a `tessera` command (a head), or mpirun or srun starting ranks, running in the background with its
// output in a file, for tests that disturb it while it runs (a worker or rank killed or stopped mid-step) and then
// read what it said.
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
  // Tags the constructor that runs argv as given, its program found on PATH (mpirun, srun).
  struct Program {};

  // `out`: a file for its standard output alone (the text a run prints); empty: with its log in output().
  explicit Background(std::vector<std::string> args, const std::filesystem::path& out = {})
      : Background(Program{}, with_tessera(std::move(args)), out) {}

  Background(Program, std::vector<std::string> args, const std::filesystem::path& out = {}) {
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
      execvp(argv[0], argv.data());
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
  void signal(int sig) const { kill(pid_, sig); }
  // Waits up to `limit` for it to end; its exit status (128 + the signal that ended it), or -1 if it did not.
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
  static std::vector<std::string> with_tessera(std::vector<std::string> args) {
    args.insert(args.begin(), test::tessera_bin().string());
    return args;
  }

  pid_t pid_ = -1;
  bool done_ = false;
  std::filesystem::path log_;
};

// The pid of a running process whose command line and environment (NUL-separated, as /proc gives them) `match`
// accepts, or -1: how a test finds a rank that mpirun or srun started.
template <typename Match>
pid_t find_process(Match match) {
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream env(entry.path() / "environ", std::ios::binary);
    const std::string all{std::istreambuf_iterator<char>(env), std::istreambuf_iterator<char>()};
    std::ifstream cmd(entry.path() / "cmdline", std::ios::binary);
    const std::string cmdline{std::istreambuf_iterator<char>(cmd), std::istreambuf_iterator<char>()};
    if (match(cmdline, all)) return static_cast<pid_t>(std::stol(name));
  }
  return -1;
}

}  // namespace tessera::test
