// Test helper: a real `tessera worker` child process on loopback (port chosen by the OS), stopped on destruction.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "support/test_paths.h"

namespace tessera::test {

class WorkerProcess {
 public:
  // `listen`: a fixed address, so a restarted worker is found where the killed one was.
  // `log`: a file for the worker's stderr (its log), to read what it did; empty: the test's stderr.
  explicit WorkerProcess(std::vector<std::string> extra_args = {}, std::string listen = "127.0.0.1:0",
                         const std::filesystem::path& log = {}) {
    int out[2];
    if (pipe(out) != 0) throw std::runtime_error("pipe failed");
    pid_ = fork();
    if (pid_ < 0) throw std::runtime_error("fork failed");
    if (pid_ == 0) {
      dup2(out[1], 1);
      if (!log.empty()) {
        const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd >= 0) dup2(fd, 2);
      }
      close(out[0]);
      close(out[1]);
      std::vector<std::string> args = {tessera_bin().string(), "worker", "--listen", listen, "-t", "1"};
      args.insert(args.end(), extra_args.begin(), extra_args.end());
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    close(out[1]);
    stdout_ = fdopen(out[0], "r");
    char line[256] = {};
    if (stdout_ == nullptr || fgets(line, sizeof line, stdout_) == nullptr) {
      throw std::runtime_error("the worker did not start");
    }
    std::string s(line);
    const std::string prefix = "listening on ";
    if (s.rfind(prefix, 0) != 0) throw std::runtime_error("unexpected worker output: " + s);
    address_ = s.substr(prefix.size());
    while (!address_.empty() && (address_.back() == '\n' || address_.back() == '\r')) address_.pop_back();
  }
  ~WorkerProcess() { stop(SIGTERM); }
  WorkerProcess(const WorkerProcess&) = delete;
  WorkerProcess& operator=(const WorkerProcess&) = delete;

  const std::string& address() const { return address_; }
  pid_t pid() const { return pid_; }
  bool running() const { return pid_ > 0 && waitpid(pid_, nullptr, WNOHANG) == 0; }

  // SIGKILL plays a crash; SIGTERM a clean stop. Returns the exit status (or 128 + signal).
  int stop(int sig) {
    if (pid_ <= 0) return -1;
    kill(pid_, sig);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    if (stdout_) fclose(stdout_);
    stdout_ = nullptr;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

 private:
  pid_t pid_ = -1;
  FILE* stdout_ = nullptr;
  std::string address_;
};

}  // namespace tessera::test
